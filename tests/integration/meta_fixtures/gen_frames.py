"""Generates a C program for the `frames` oracle: many functions with random
parameters (integers, doubles, structs by value, more than fit in registers),
locals of random types in nested blocks, sometimes a variable-length array,
each recording at run time the address of a variable and its own CFA
(__builtin_dwarf_cfa()) at the PC of a probe call."""
import random

TYPES = ["int", "long", "char", "double", "short", "struct pair", "struct big", "char *",
         "unsigned char", "float"]


def program(seed, nfuncs=40):
    r = random.Random(seed)
    out = ["#include <stdio.h>", "#include <string.h>",
           "struct pair { int a; long b; };", "struct big { double d[5]; char tag; };",
           "static void __attribute__((noinline)) probe(const char *fn, const char *var,"
           " const void *addr, const void *cfa)",
           "{ printf(\"%s %s %lu %lu %lu\\n\", fn, var, (unsigned long)__builtin_return_address(0),"
           " (unsigned long)addr, (unsigned long)cfa); }",
           "static void __attribute__((noinline)) sink(const void *p)"
           " { __asm__ volatile(\"\" : : \"r\"(p) : \"memory\"); }"]
    calls = []
    for i in range(nfuncs):
        fn = f"gf{i}"
        params = [(f"p{k}", r.choice(TYPES)) for k in range(r.randint(0, 9))]
        body = []
        def probe(var, addr):
            body.append(f"  sink({addr}); probe(\"{fn}\", \"{var}\", {addr}, __builtin_dwarf_cfa());")
        for name, t in params:
            if r.random() < 0.3:
                probe(name, f"&{name}")
        for k in range(r.randint(1, 5)):
            t = r.choice(TYPES)
            arr = f"[{r.randint(1, 40)}]" if r.random() < 0.3 else ""
            v = f"l{k}"
            body.append(f"  {t} {v}{arr}; memset(&{v}, {k}, sizeof {v});")
            if r.random() < 0.5:
                body.append(f"  {{ long inner{k}[{r.randint(1, 9)}]; memset(inner{k}, 1, sizeof inner{k});")
                probe(f"inner{k}", f"inner{k}")
                body.append("  }")
            probe(v, f"&{v}")
        if r.random() < 0.2:
            body.append("  char vla[n % 50 + 1]; memset(vla, 2, sizeof vla);")
            probe("vla", "vla")
        ps = ", ".join(f"{t} {n}" for n, t in params)
        sig = f"int n{', ' + ps if ps else ''}"
        out.append(f"int __attribute__((noinline)) {fn}({sig})\n{{")
        out += body
        out.append("  return n;\n}")
        args = ", ".join({"struct pair": "(struct pair){1, 2}", "struct big": "(struct big){{1}, 3}",
                          "char *": "0"}.get(t, "1") for _, t in params)
        calls.append(f"  s += {fn}(argc{', ' + args if args else ''});")
    out.append("int main(int argc, char **argv)\n{\n  (void)argv;\n  int s = 0;")
    out += calls
    out.append("  return s == 12345;\n}")
    return "\n".join(out) + "\n"
