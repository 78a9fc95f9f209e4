/* lu.c - LU/HPL-like kernel: right-looking blocked LU factorisation with
 * partial pivoting of a dense N x N matrix. The trailing matrix shrinks, so
 * its last rows and columns are touched far more than its first ones.
 * usage: lu N BLOCK [STEPS]  (STEPS: block steps to run, default all; a
 * partial factorisation keeps traces short while touching the whole
 * matrix) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 512;
	int nb = argc > 2 ? atoi(argv[2]) : 32;
	int steps = argc > 3 ? atoi(argv[3]) : 1 << 30;
	double *a = malloc((size_t)n * n * sizeof(double));
	if (!a)
		return 1;
	unsigned long long s = 7;
	for (size_t i = 0; i < (size_t)n * n; i++) {
		s = s * 6364136223846793005ull + 1;
		a[i] = (double)(s >> 40) / (1 << 24) - 0.5;
	}
#define A(i, j) a[(size_t)(i) * n + (j)]
	for (int k0 = 0; k0 < n && k0 / nb < steps; k0 += nb) {
		int k1 = k0 + nb < n ? k0 + nb : n;
		for (int k = k0; k < k1; k++) {   /* panel */
			int piv = k;
			for (int i = k + 1; i < n; i++)
				if (fabs(A(i, k)) > fabs(A(piv, k)))
					piv = i;
			if (piv != k)
				for (int j = 0; j < n; j++) {
					double t = A(k, j);
					A(k, j) = A(piv, j);
					A(piv, j) = t;
				}
			for (int i = k + 1; i < n; i++) {
				A(i, k) /= A(k, k);
				for (int j = k + 1; j < k1; j++)
					A(i, j) -= A(i, k) * A(k, j);
			}
		}
		for (int k = k0; k < k1; k++)     /* U block row */
			for (int i = k + 1; i < k1; i++)
				for (int j = k1; j < n; j++)
					A(i, j) -= A(i, k) * A(k, j);
		for (int i = k1; i < n; i++)      /* trailing update */
			for (int k = k0; k < k1; k++) {
				double l = A(i, k);
				for (int j = k1; j < n; j++)
					A(i, j) -= l * A(k, j);
			}
	}
	printf("lu: a[n-1][n-1] %g\n", A(n - 1, n - 1));
	return 0;
}
