// Fixture for `types` on C++: base class subobjects (DW_TAG_inheritance),
// vtable pointers, static members (not part of the layout). Prints the
// compiler's view: sizeof, offsetof, and each base's offset in Derived.
#include <cstddef>
#include <cstdio>

struct Base { int a; virtual ~Base() {} };
struct Mid : Base { double d; };
struct Other { char c[3]; };
struct Derived : Mid, Other { short s; static int counter; int tail; };
int Derived::counter;
Derived derived_instance;

int main()
{
	Derived *p = &derived_instance;
	std::printf("size Derived %zu\n", sizeof(Derived));
	std::printf("size Mid %zu\n", sizeof(Mid));
	std::printf("off Derived s %zu\n", offsetof(Derived, s));
	std::printf("off Derived tail %zu\n", offsetof(Derived, tail));
	std::printf("off Derived d %zu\n", offsetof(Derived, d));
	std::printf("off Derived a %zu\n", offsetof(Derived, a));
	std::printf("off Derived c %zu\n", offsetof(Derived, c));
	std::printf("base Derived Other %td\n", (char *)static_cast<Other *>(p) - (char *)p);
	std::printf("base Derived Mid %td\n", (char *)static_cast<Mid *>(p) - (char *)p);
	return 0;
}
