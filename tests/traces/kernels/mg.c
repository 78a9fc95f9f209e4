/* mg.c - MG-like kernel (NAS MG's core): V-cycles of a 7-point stencil
 * smoother, restriction and prolongation on a hierarchy of 3-D grids.
 * Every grid point is touched about equally often: low locality.
 * usage: mg N CYCLES   (finest grid N^3, N a power of two) */
#include <stdio.h>
#include <stdlib.h>

#define IX(g, i, j, k) ((g)[((size_t)(i) * (n) + (j)) * (n) + (k)])

static void smooth(double *u, const double *f, int n)
{
	for (int i = 1; i < n - 1; i++)
		for (int j = 1; j < n - 1; j++)
			for (int k = 1; k < n - 1; k++)
				IX(u, i, j, k) = (IX(f, i, j, k) + IX(u, i - 1, j, k) +
					IX(u, i + 1, j, k) + IX(u, i, j - 1, k) +
					IX(u, i, j + 1, k) + IX(u, i, j, k - 1) +
					IX(u, i, j, k + 1)) / 6.0;
}

int main(int argc, char **argv)
{
	int n0 = argc > 1 ? atoi(argv[1]) : 64;
	int cycles = argc > 2 ? atoi(argv[2]) : 2;
	int levels = 0;
	while ((n0 >> levels) >= 4)
		levels++;
	double **u = calloc(levels, sizeof(double *));
	double **f = calloc(levels, sizeof(double *));
	for (int l = 0; l < levels; l++) {
		size_t n = (size_t)(n0 >> l);
		u[l] = calloc(n * n * n, sizeof(double));
		f[l] = calloc(n * n * n, sizeof(double));
		if (!u[l] || !f[l])
			return 1;
	}
	for (size_t i = 0; i < (size_t)n0 * n0 * n0; i++)
		f[0][i] = (double)(i % 17) - 8;
	for (int c = 0; c < cycles; c++) {
		for (int l = 0; l < levels; l++) {
			int n = n0 >> l;
			smooth(u[l], f[l], n);
			if (l + 1 < levels) {   /* restrict residual-ish to l+1 */
				int m = n / 2;
				for (int i = 0; i < m; i++)
					for (int j = 0; j < m; j++)
						for (int k = 0; k < m; k++) {
							double s = IX(u[l], 2 * i, 2 * j, 2 * k);
							f[l + 1][((size_t)i * m + j) * m + k] = s;
						}
			}
		}
		for (int l = levels - 2; l >= 0; l--) {
			int n = n0 >> l, m = n / 2;
			for (int i = 0; i < n; i++)
				for (int j = 0; j < n; j++)
					for (int k = 0; k < n; k++)
						IX(u[l], i, j, k) += 0.5 *
							u[l + 1][((size_t)(i / 2) * m + j / 2) * m + k / 2];
			smooth(u[l], f[l], n);
		}
	}
	printf("mg: u %g\n", u[0][(size_t)n0 * n0 * n0 / 2]);
	return 0;
}
