#!/usr/bin/env bash
# cluster_paritydist_kernel.sh - cluster_parity_kernel.sh's run with CPK_MODE=parity-dist CPK_VICTIM=4: the kernel swaps
# into five nodes with parity spread over the nodes, and node 4 (a data and parity node) is killed midway.
CPK_MODE=parity-dist CPK_VICTIM=4 exec bash "$(dirname "$0")/cluster_parity_kernel.sh"
