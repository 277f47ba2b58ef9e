"""Generated container-blind checks for KV101's fix-safety properties (tests/test_fix_safety_property.py):
one worker function per program, in the shapes a safe fix once broke — tuples of classes, starred classes,
a walrus, shadowed names, f-strings, comments inside the check, tabs, negations, comprehensions — and a
guarded use that records every spec reaching it in `seen`.

`run_worker` runs a program (as written, or as `kvlint fix` left it) on groups of one spec each: the fast
property with stand-in classes built from the tree's hierarchy, the slow one in the real vLLM 0.29.0.
"""

from __future__ import annotations

import builtins
import types
from dataclasses import dataclass

CLASSES = (
    "MambaSpec",
    "FullAttentionSpec",
    "MLAAttentionSpec",
    "SlidingWindowSpec",
    "(MambaSpec, CrossAttentionSpec)",
    "((MambaSpec, CrossAttentionSpec))",
    "(MambaSpec, *EXTRA)",
)
FORMS = ("isinstance", "isinstance-wrapped", "is", "is not", "==", "!=", "in", "not in")
SHAPES = ("if", "not-if", "assign", "fstring", "comprehension")
SUBJECTS = ("g.kv_cache_spec", "spec", "walrus")
USES = ("none", "same", "other")  # the guarded use: none, the checked name, the other name of the value
SHADOWS = ("none", "parameter all", "local any", "module iter_layer_specs", "local iter_layer_specs", "module all")
IMPORTED = "CrossAttentionSpec, FullAttentionSpec, MLAAttentionSpec, MambaSpec, SlidingWindowSpec"


@dataclass(frozen=True)
class Program:
    classes: str
    form: str
    shape: str
    subject: str
    use: str
    shadow: str
    indent: str  # "    " or "\t"
    comment: bool
    newline: str = "\n"

    def check(self, subject: str) -> str:
        classes, indent = self.classes, self.indent
        if self.form in ("in", "not in") and not classes.startswith("("):
            classes = f"({classes},)"
        if self.form in ("is", "is not", "==", "!=") and classes.startswith("("):
            return f"isinstance({subject}, {classes})"
        if self.form == "isinstance-wrapped" and self.shape not in ("fstring", "comprehension"):
            comment = "  # the group's" if self.comment else ""
            return f"isinstance(\n{indent * 3}{subject},{comment}\n{indent * 3}{classes},\n{indent * 2})"
        if self.form.startswith("isinstance"):
            return f"isinstance({subject}, {classes})"
        return f"type({subject}) {self.form} {classes}"

    @property
    def source(self) -> str:
        i = self.indent
        subject = {"walrus": "(spec := g.kv_cache_spec)", "spec": "spec"}.get(self.subject, self.subject)
        # the guarded use reads the checked value by the name the check used or by its other name
        checked = "spec" if self.subject != "g.kv_cache_spec" else "g.kv_cache_spec"
        other = "g.kv_cache_spec" if checked == "spec" else "spec"
        use = {"none": "", "same": f"seen.append({checked})", "other": f"seen.append({other})"}[self.use]
        bind = "" if self.subject == "walrus" else f"{i * 2}spec = g.kv_cache_spec\n"
        comment = "  # keep me" if self.comment else ""
        check = self.check(subject)
        loop = f"{i}for g in kv_cache_config.kv_cache_groups:\n{bind}"
        if self.shape == "if":
            body = f"{loop}{i * 2}if {check}:{comment}\n{i * 3}found.append(1)\n" + (f"{i * 3}{use}\n" if use else "")
        elif self.shape == "not-if":
            body = f"{loop}{i * 2}if not {check}:\n{i * 3}continue\n{i * 2}found.append(1)\n"
            body += f"{i * 2}{use}\n" if use else ""
        elif self.shape == "assign":
            body = f"{loop}{i * 2}chosen = {check}{comment}\n{i * 2}found.append(chosen)\n"
            body += f"{i * 2}if chosen:\n{i * 3}{use}\n" if use else ""
        elif self.shape == "fstring":
            body = f"{loop}{i * 2}found.append(f'{{{self.check(subject)}}}')\n"
        else:
            body = f"{i}found.extend(1 for h in kv_cache_config.kv_cache_groups if {self.check('h.kv_cache_spec')})\n"
        shadow_module = {
            "module iter_layer_specs": "def iter_layer_specs(spec):\n    return [spec]\n\n",
            "module all": "def all(values):\n    return False\n\n",
        }.get(self.shadow, "")
        parameter = ", all=None" if self.shadow == "parameter all" else ""
        local = {"local any": f"{i}any = bool\n", "local iter_layer_specs": f"{i}iter_layer_specs = list\n"}
        text = (
            f"from vllm.v1.kv_cache_interface import {IMPORTED}\n\n"
            "EXTRA = (CrossAttentionSpec,)\n\n"
            f"{shadow_module}"
            f"def worker(kv_cache_config, seen{parameter}):\n"
            f"{local.get(self.shadow, '')}"
            f"{i}found = []\n"
            f"{body}"
            f"{i}return found\n"
        )
        return text.replace("\n", self.newline)


def stand_in_interface(bases: dict[str, tuple[str, ...]]) -> types.ModuleType:
    """`vllm.v1.kv_cache_interface` with a class per name of the tree's hierarchy and its two helpers."""
    module = types.ModuleType("vllm.v1.kv_cache_interface")
    made: dict[str, type] = {}

    def make(name: str) -> type:
        if name not in made:
            made[name] = type(name, tuple(make(b) for b in bases.get(name, ())) or (object,), {})
        return made[name]

    for name in bases:
        setattr(module, name, make(name))

    def iter_layer_specs(kv_cache_spec):
        inner = getattr(kv_cache_spec, "kv_cache_specs", None)
        return list(inner.values()) if isinstance(inner, dict) else [kv_cache_spec]

    def is_full_attention_spec(kv_cache_spec):
        layers = iter_layer_specs(kv_cache_spec)
        return len(layers) > 0 and all(isinstance(s, made["FullAttentionSpec"]) for s in layers)

    module.iter_layer_specs = iter_layer_specs
    module.is_full_attention_spec = is_full_attention_spec
    return module


def load(text: str, interface: types.ModuleType) -> dict:
    """Run a program's module body with `interface` as the module its imports name."""

    def importer(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "vllm.v1.kv_cache_interface":
            return interface
        return builtins.__import__(name, globals, locals, fromlist, level)

    namespace = {"__builtins__": {**vars(builtins), "__import__": importer}, "__name__": "generated"}
    exec(compile(text, "generated.py", "exec"), namespace)  # noqa: S102 - the test's own generated code
    return namespace


def run_worker(namespace: dict, group_specs: list) -> tuple[list, list]:
    """(what the worker found, the specs that reached its guarded use) for one group per spec."""
    groups = [types.SimpleNamespace(kv_cache_spec=spec, layer_names=["layer"]) for spec in group_specs]
    seen: list = []
    found = namespace["worker"](types.SimpleNamespace(kv_cache_groups=groups), seen)
    return found, seen


def sample(count: int, seed: int) -> list[Program]:
    """A fixed draw of programs (the slow test runs each in the real vLLM: the same ones every run)."""
    import random

    chooser = random.Random(seed)
    return [
        Program(
            chooser.choice(CLASSES),
            chooser.choice(FORMS),
            chooser.choice(SHAPES),
            chooser.choice(SUBJECTS),
            # most programs without a use or a shadowed name: those get no fix, the rest do
            chooser.choice(USES) if chooser.random() < 0.4 else "none",
            chooser.choice(SHADOWS) if chooser.random() < 0.3 else "none",
            chooser.choice(["    ", "\t"]),
            chooser.random() < 0.5,
            chooser.choice(["\n", "\r\n"]),
        )
        for _ in range(count)
    ]


# Run by the vLLM runtime's interpreter (tests/test_fix_safety_runtime.py): each program as written and as
# fixed, on a group of a plain spec of every class and of a container of every composition; JSON out.
RUNTIME_SCRIPT = r"""
import dataclasses, importlib.util, json, sys, types
import torch
import vllm.v1.kv_cache_interface as interface

job = json.load(open(sys.argv[1]))
FIELDS = {
    "block_size": 16, "num_kv_heads": 8, "head_size": 128, "dtype": torch.bfloat16, "sliding_window": 1024,
    "attention_chunk_size": 1024, "rswa_window": 1024, "shapes": ((4, 1024), (16, 64, 128)),
    "dtypes": (torch.bfloat16, torch.float32), "mamba_cache_mode": "align",
}

def build(name):
    cls = getattr(interface, name)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in FIELDS.items() if k in fields})

plain = {}
for name in job["classes"]:
    try:
        plain[name] = build(name)
    except Exception as error:  # a class this vLLM builds with fields kvlint does not know
        pass
containers = []
for layers in job["compositions"]:
    if all(name in plain for name in layers):
        specs = {f"model.layers.{i}": plain[name] for i, name in enumerate(layers)}
        containers.append((layers, interface.UniformTypeKVCacheSpecs(block_size=16, kv_cache_specs=specs)))

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def answer(module, spec):
    groups = [types.SimpleNamespace(kv_cache_spec=spec, layer_names=["layer"])]
    seen = []
    try:
        found = module.worker(types.SimpleNamespace(kv_cache_groups=groups), seen)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"found": [str(f) for f in found], "seen": [type(s).__name__ for s in seen]}

results = {}
for index, (original, fixed) in enumerate(job["programs"]):
    try:
        before, after = load(original, f"original_{index}"), load(fixed, f"fixed_{index}")
    except Exception as error:
        results[fixed] = {"load_error": f"{type(error).__name__}: {error}"}
        continue
    results[fixed] = {
        "plain": {name: [answer(before, spec), answer(after, spec)] for name, spec in plain.items()},
        "containers": [[layers, answer(after, spec)] for layers, spec in containers],
    }
json.dump({"classes": sorted(plain), "results": results}, open(sys.argv[2], "w"))
"""
