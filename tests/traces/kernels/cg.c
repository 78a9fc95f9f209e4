/* cg.c - CG-like kernel (NAS CG's core): conjugate-gradient iterations on a
 * random sparse symmetric matrix in CSR form. The matrix streams once per
 * iteration; the vectors are hit through random column indices, so a few
 * pages take most accesses (the paper's "high locality").
 * usage: cg N NNZ_PER_ROW ITERS */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rs = 12345;
static unsigned rnd(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rs >> 33);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 65536;
	int k = argc > 2 ? atoi(argv[2]) : 12;
	int iters = argc > 3 ? atoi(argv[3]) : 3;
	long nnz = (long)n * k;
	int *rowp = malloc((n + 1) * sizeof(int));
	int *col = malloc(nnz * sizeof(int));
	double *val = malloc(nnz * sizeof(double));
	double *x = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
	double *p = malloc(n * sizeof(double)), *q = malloc(n * sizeof(double));
	double *z = malloc(n * sizeof(double));
	if (!rowp || !col || !val || !x || !r || !p || !q || !z)
		return 1;
	for (int i = 0; i <= n; i++)
		rowp[i] = (int)((long)i * k);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < k; j++) {
			/* Half the entries near the diagonal, half anywhere. */
			int c = (j & 1) ? (int)(rnd() % n)
					: (i + (int)(rnd() % 64) - 32 + n) % n;
			col[(long)i * k + j] = c;
			val[(long)i * k + j] = (c == i) ? k + 1.0 : 0.01 * (rnd() % 100);
		}
	for (int i = 0; i < n; i++) {
		x[i] = 0;
		r[i] = p[i] = 1.0;
		z[i] = 0;
	}
	double rho = n;
	for (int it = 0; it < iters; it++) {
		for (int i = 0; i < n; i++) {
			double s = 0;
			for (int e = rowp[i]; e < rowp[i + 1]; e++)
				s += val[e] * p[col[e]];
			q[i] = s;
		}
		double pq = 0;
		for (int i = 0; i < n; i++)
			pq += p[i] * q[i];
		double a = rho / pq, rho2 = 0;
		for (int i = 0; i < n; i++) {
			z[i] += a * p[i];
			r[i] -= a * q[i];
			rho2 += r[i] * r[i];
		}
		for (int i = 0; i < n; i++)
			p[i] = r[i] + rho2 / rho * p[i];
		rho = rho2;
	}
	printf("cg: rho %g\n", rho);
	return 0;
}
