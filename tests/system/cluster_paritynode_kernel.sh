#!/usr/bin/env bash
# cluster_paritynode_kernel.sh - cluster_parity_kernel.sh's run with CPK_MODE=parity CPK_VICTIM=2: the kernel swaps
# into five nodes with parity on node 2, and node 2 (the parity node) is killed midway.
CPK_MODE=parity CPK_VICTIM=2 exec bash "$(dirname "$0")/cluster_parity_kernel.sh"
