/* json.c - see json.h. */
#include "tools/json.h"

#include <math.h>
#include <stdio.h>

void json_put_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

void json_put_num(double v)
{
	if (!isfinite(v))
		fputs("null", stdout);
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)   /* 2^53 */
		printf("%.0f", v);
	else
		printf("%.17g", v);
}
