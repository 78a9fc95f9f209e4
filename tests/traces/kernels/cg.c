/* cg.c - CG-like kernel (NAS CG's core): conjugate-gradient iterations on a
 * random sparse symmetric matrix in CSR form. The matrix streams once per
 * iteration; the vectors are hit through random column indices, so a few
 * pages take most accesses (the paper's "high locality").
 * usage: cg N NNZ_PER_ROW ITERS (defaults 65536 8 6) */
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
	int k = argc > 2 ? atoi(argv[2]) : 8;
	int iters = argc > 3 ? atoi(argv[3]) : 6;
	long nnz = (long)n * k;
	/* Construction, as NAS CG's makea does it: the matrix is generated
	 * as unsorted triplets in temporary arrays, then bucketed by row into
	 * CSR. The temporaries are touched only here: after this phase most
	 * of the footprint is cold, and the iterations' working set (CSR +
	 * vectors) is the hot part (the paper: 98% of accesses to 40%). */
	int *trow = malloc(nnz * sizeof(int)), *tcol = malloc(nnz * sizeof(int));
	double *tval = malloc(nnz * sizeof(double));
	long *perm = malloc(nnz * sizeof(long));
	int *rowp = calloc(n + 1, sizeof(int));
	int *col = malloc(nnz * sizeof(int));
	double *val = malloc(nnz * sizeof(double));
	double *x = malloc(n * sizeof(double)), *r = malloc(n * sizeof(double));
	double *p = malloc(n * sizeof(double)), *q = malloc(n * sizeof(double));
	double *z = malloc(n * sizeof(double));
	if (!trow || !tcol || !tval || !perm || !rowp || !col || !val || !x ||
	    !r || !p || !q || !z)
		return 1;
	for (long e = 0; e < nnz; e++) {
		int i = (int)(rnd() % n);
		/* Half the entries near the diagonal, half anywhere. */
		int c = (e & 1) ? (int)(rnd() % n)
				: (i + (int)(rnd() % 64) - 32 + n) % n;
		trow[e] = i;
		tcol[e] = c;
		tval[e] = (c == i) ? k + 1.0 : 0.01 * (rnd() % 100);
	}
	for (long e = 0; e < nnz; e++)
		rowp[trow[e] + 1]++;
	for (int i = 0; i < n; i++)
		rowp[i + 1] += rowp[i];
	for (long e = 0; e < nnz; e++)
		perm[e] = 0;
	{
		int *fill = calloc(n, sizeof(int));
		if (!fill)
			return 1;
		for (long e = 0; e < nnz; e++)
			perm[rowp[trow[e]] + fill[trow[e]]++] = e;
		free(fill);
	}
	for (long e = 0; e < nnz; e++) {
		col[e] = tcol[perm[e]];
		val[e] = tval[perm[e]];
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
	printf("cg: rho %g (%p %p %p %p)\n", rho, (void *)trow, (void *)tcol,
	       (void *)tval, (void *)perm);
	return 0;
}
