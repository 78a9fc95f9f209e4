/* json.h - the JSON writing nvcachectl needs, on stdout: a string,
 * quoted and escaped; a number, whole ones as integers (a byte count of
 * 21 GB is 21028510516, not 2.10285e+10) and others to full precision. */
#pragma once

void json_put_str(const char *s);
void json_put_num(double v);
