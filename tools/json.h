/* json.h - the one piece of JSON writing nvcachectl needs: a string,
 * quoted and escaped, on stdout. */
#pragma once

void json_put_str(const char *s);
