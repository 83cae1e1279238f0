// C++ layout corpus for `types`: virtual and multiple inheritance, empty
// bases, [[no_unique_address]], templates, anonymous unions. The program
// prints the compiler's own view of each layout, measured at run time on
// complete objects: sizeof, member offsets, non-virtual base offsets and the
// offset of every virtual base (direct or indirect) in a complete object.
#include <cstddef>
#include <cstdio>

struct A { int a; virtual ~A() {} };
struct B : virtual A { int b; };
struct C : virtual A { long c; };
struct D : B, C { int d; };                       // diamond
struct E { virtual void f() {} };                 // nearly empty
struct F : virtual E { int f1; };                 // virtual primary base
struct V1 { int v1; };
struct V2 { double v2; };
struct G : virtual V1, virtual V2 { char g; };    // two virtual bases, in order
struct H : virtual B, virtual V2 { short h; };    // a virtual base with its own
struct Empty {};
struct I : Empty { int i; };                      // empty base optimisation
struct J : virtual Empty { int j; };              // empty virtual base
struct K { [[no_unique_address]] Empty e; int k; };
template <class T> struct Pair { T first; char second; };
struct L { Pair<double> p; Pair<char> q; };
template <class T> struct TV : virtual A { T t; };
struct M {
	int tag;
	union { int i; double d; };
	struct { char x, y; };
};
struct N : A, V2 { int n; };                      // multiple, non-virtual
struct P : A { int p; };                          // tail padding of A reused
struct Q : D, virtual V1 { int q; };              // deeper
struct R : virtual F, virtual G { char r; };
struct S : E, virtual V1 { char s; };             // non-virtual primary
struct T2 : virtual E, virtual A { int t2; };

D d_; F f_; G g_; H h_; I i_; J j_; K k_; L l_; TV<int> tv_; M m_; N n_; P p_; Q q_; R r_; S s_; T2 t2_;

#define SIZE(T) std::printf("size %s %zu\n", #T, sizeof(T))
#define OFF(T, m) do { static T o; std::printf("off %s %s %td\n", #T, #m, (char *)&o.m - (char *)&o); } while (0)
#define BASE(T, X) do { static T o; std::printf("base %s %s %td\n", #T, #X, (char *)static_cast<X *>(&o) - (char *)&o); } while (0)
#define VBASE(T, X) do { static T o; std::printf("vbase %s %s %td\n", #T, #X, (char *)static_cast<X *>(&o) - (char *)&o); } while (0)

int main()
{
	SIZE(A); SIZE(B); SIZE(C); SIZE(D); SIZE(E); SIZE(F); SIZE(G); SIZE(H); SIZE(I); SIZE(J);
	SIZE(K); SIZE(L); SIZE(TV<int>); SIZE(M); SIZE(N); SIZE(P); SIZE(Q); SIZE(R); SIZE(S); SIZE(T2);
	OFF(A, a); OFF(B, b); OFF(C, c); OFF(D, d); OFF(F, f1); OFF(G, g); OFF(H, h); OFF(I, i);
	OFF(J, j); OFF(K, k); OFF(L, p); OFF(L, q); OFF(TV<int>, t); OFF(M, tag); OFF(M, i); OFF(M, d);
	OFF(M, x); OFF(M, y); OFF(N, n); OFF(P, p); OFF(Q, q); OFF(R, r); OFF(S, s); OFF(T2, t2);
	OFF(Pair<double>, second); OFF(Pair<char>, second);
	BASE(D, B); BASE(D, C); BASE(I, Empty); BASE(N, A); BASE(N, V2); BASE(P, A); BASE(Q, D);
	BASE(S, E);
	VBASE(B, A); VBASE(C, A); VBASE(D, A); VBASE(F, E); VBASE(G, V1); VBASE(G, V2); VBASE(H, B);
	VBASE(H, A); VBASE(H, V2); VBASE(J, Empty); VBASE(TV<int>, A); VBASE(Q, A); VBASE(Q, V1);
	VBASE(R, F); VBASE(R, E); VBASE(R, G); VBASE(R, V1); VBASE(R, V2); VBASE(S, V1);
	VBASE(T2, E); VBASE(T2, A);
	return 0;
}
