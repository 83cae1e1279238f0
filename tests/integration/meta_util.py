"""Helpers for the `kiln meta` end-to-end tests: compiling fixtures and
reading the tools' JSON output."""
import json
import pathlib
import subprocess

FIXTURES = pathlib.Path(__file__).resolve().parent / "meta_fixtures"


def cc(out, sources, flags=(), cwd=None, compiler="gcc"):
    cmd = [compiler, "-o", str(out)] + list(flags) + [str(s) for s in sources]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=120)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stderr}"
    return out


def meta_json(kiln_bin, tool, binary):
    r = subprocess.run([str(kiln_bin), "meta", tool, str(binary), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kiln meta {tool} {binary} failed:\n{r.stderr}"
    return json.loads(r.stdout)


class Types:
    """The `types` output, indexed by id and by name."""

    def __init__(self, doc):
        self.by_id = {t["id"]: t for t in doc["types"]}
        self.by_name = {}
        for t in doc["types"]:
            if t.get("name"):
                self.by_name.setdefault((t["kind"], t["name"]), []).append(t)

    def strip(self, tid):
        t = self.by_id[tid]
        while t["kind"] in ("typedef", "const", "volatile", "restrict", "atomic"):
            t = self.by_id[t["type"]]
        return t

    def find(self, agg, name, base=0):
        """(bit offset, bit size or 0) of NAME in aggregate AGG, looking
        through anonymous members as C does."""
        for m in agg["members"]:
            if m.get("virtual"):
                continue  # no fixed offset: see the type's virtual_bases
            bit = m.get("bit_offset", m["offset"] * 8)
            if m["name"] == name:
                return base + bit, m.get("bit_size", 0)
            if m["name"] is None and m["type"]:
                inner = self.strip(m["type"])
                if inner["kind"] in ("struct", "union", "class"):
                    hit = self.find(inner, name, base + bit)
                    if hit:
                        return hit
        return None

    def member_size(self, agg, path):
        """Byte size of the type of member PATH of AGG."""
        parts = path.split(".")
        for part in parts[:-1]:
            agg = self.strip(self._member_type(agg, part))
        return self.strip(self._member_type(agg, parts[-1])).get("size")

    def path(self, agg, path):
        base, size = 0, 0
        parts = path.split(".")
        for i, part in enumerate(parts):
            hit = self.find(agg, part, base)
            assert hit, f"member {part} of {path} not found in {agg.get('name')}"
            base, size = hit
            if i + 1 < len(parts):
                m = self._member_type(agg, part)
                agg = self.strip(m)
        return base, size

    def _member_type(self, agg, name):
        for m in agg["members"]:
            if m["name"] == name:
                return m["type"]
            if m["name"] is None and m["type"]:
                inner = self.strip(m["type"])
                if inner["kind"] in ("struct", "union", "class"):
                    t = self._member_type(inner, name)
                    if t:
                        return t
        return None
