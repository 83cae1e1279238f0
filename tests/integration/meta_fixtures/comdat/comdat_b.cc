#include "comdat.h"

int use_a(int);

int main(int argc, char **)
{
	Box<int> b{argc};
	std::unordered_map<int, int> m;
	m[argc] = 2;
	return use_a(argc) + b.get() + shared_helper(argc) + (int)m.size();
}
