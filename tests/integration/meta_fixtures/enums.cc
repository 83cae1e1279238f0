// Fixture for `types` on enumerators at the edges of 64 bits: unsigned enums
// at and above 2^63, signed ones down to INT64_MIN, small ones of both
// signednesses. Prints each enumerator's value as the compiler sees it, read
// by the signedness of the enum's underlying type.
#include <cstdint>
#include <cstdio>
#include <type_traits>

enum class Big : std::uint64_t { Low = 1, Top = 0x8000000000000000ull, Max = 0xffffffffffffffffull };
enum class Neg : std::int64_t { Min = INT64_MIN, MinusOne = -1, Pos = 5 };
enum Small : unsigned char { SmallMax = 255 };
enum SChar : signed char { SCharMin = -128, SCharMax = 127 };
enum Plain { PlainA = 3, PlainBig = 0x7fffffff };

Big b;
Neg n;
Small s;
SChar sc;
Plain p;

template <class E> static void show(const char *enum_name, const char *name, E v)
{
	using U = std::underlying_type_t<E>;
	if (std::is_signed_v<U>)
		std::printf("%s %s %lld\n", enum_name, name, (long long)v);
	else
		std::printf("%s %s %llu\n", enum_name, name, (unsigned long long)v);
}

int main()
{
	show("Big", "Low", Big::Low);
	show("Big", "Top", Big::Top);
	show("Big", "Max", Big::Max);
	show("Neg", "Min", Neg::Min);
	show("Neg", "MinusOne", Neg::MinusOne);
	show("Neg", "Pos", Neg::Pos);
	show("Small", "SmallMax", SmallMax);
	show("SChar", "SCharMin", SCharMin);
	show("SChar", "SCharMax", SCharMax);
	show("Plain", "PlainA", PlainA);
	show("Plain", "PlainBig", PlainBig);
	return 0;
}
