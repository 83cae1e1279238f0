// Inline and template functions emitted in both CUs (COMDAT): the linker
// keeps one copy, and the DWARF of the other keeps describing it at the
// linker's tombstone address (0, or -1 / -2).
#include <unordered_map>

template <class T> struct Box {
	T v;
	__attribute__((noinline)) T get() const { return v * 2; }
};

inline __attribute__((noinline)) int shared_helper(int x)
{
	static int calls; // a function-scope static of a COMDAT function
	int k = x * 3;
	return k + ++calls;
}
