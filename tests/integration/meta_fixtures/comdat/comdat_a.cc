#include "comdat.h"

int use_a(int x)
{
	Box<int> b{x};
	std::unordered_map<int, int> m;
	m[x] = 1;
	return b.get() + shared_helper(x) + (int)m.size();
}
