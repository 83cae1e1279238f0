/* Fixture for `types` on C enums at the edges of 64 bits, for DWARF without
 * DW_AT_type on enums (DWARF 2, -gstrict-dwarf): GCC gives an enum with a
 * value of 2^63 or more an unsigned type, one with a negative value a signed
 * one. Prints each enumerator's value as the program sees it, converted to
 * its enum type. */
#include <stdio.h>

enum big { LO = 1, TOP = 0x8000000000000000ULL, MAX = 0xffffffffffffffffULL } b;
enum neg { MIN = -0x7fffffffffffffffLL - 1, MINUS_ONE = -1, POS = 5 } n;
enum small { ONE = 1, BYTE = 255, WORD = 0xffffffffu } s;

#define SHOW(var, e)                                                                 \
	(((__typeof__(var))-1 < 0) ? printf(#var " " #e " %lld\n", (long long)(__typeof__(var))e) \
				   : printf(#var " " #e " %llu\n", (unsigned long long)(__typeof__(var))e))

int main(void)
{
	SHOW(b, LO); SHOW(b, TOP); SHOW(b, MAX);
	SHOW(n, MIN); SHOW(n, MINUS_ONE); SHOW(n, POS);
	SHOW(s, ONE); SHOW(s, BYTE); SHOW(s, WORD);
	return 0;
}
