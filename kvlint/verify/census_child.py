"""Group each census model's layers with the tree's own grouping function, inside a child interpreter.

Run by `kvlint verify --census` as ``python -I -B census_child.py --out FILE --cases FILE [--vllm PATH]``.
Like child.py it imports nothing from kvlint (stdlib and the vLLM tree only: ``-I`` keeps kvlint's folder off
sys.path, so it stays one file) and writes one JSON document to FILE.

For every case (a model: its layers, each a spec class with the parameters that tell it apart) it builds the
spec dict as the model's layers would report it, resolves the KV cache layout the model's backends allow as
the engine core does (the tree's ``resolve_kv_cache_layout``), and calls the tree's ``get_kv_cache_groups``
with a minimal VllmConfig, as vLLM's tests/v1/core/test_kv_cache_utils.py does, with the hybrid KV cache
manager on (the GPU platforms' default; the CPU platform switches it off). It records the spec classes of each
``UniformTypeKVCacheSpecs`` group built, or what vLLM raised. What this vLLM cannot express (a spec class it
lacks, a field kvlint cannot fill) is a case "not buildable here", with the reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import os
import pkgutil
import sys
import traceback
from typing import Any

BLOCK_SIZE = 16
GROUPING_FUNCTION = "get_kv_cache_groups"
INTERFACE = "vllm.v1.kv_cache_interface"
LAYOUT_RESOLUTION = "vllm.v1.attention.backends.utils"
# The fields a spec class requires, when the case does not say them: a GQA attention layer of 8 heads of 128 in
# bfloat16 (upstream tests' shapes). Only required fields: an optional one (FullAttentionSpec's sliding_window)
# changes what the spec is.
REQUIRED: dict[str, Any] = {
    "block_size": BLOCK_SIZE,
    "num_kv_heads": 8,
    "head_size": 128,
    "dtype": "bfloat16",
    "sliding_window": 1024,
    "attention_chunk_size": 1024,
    "rswa_window": 1024,
    # Small Mamba states; the platform pads them to the attention page (below).
    "shapes": ((2, 64), (4, 16, 16)),
    "dtypes": ("bfloat16", "float32"),
}
# Optional fields set as a served model has them: prefix caching is on, so hybrid models run Mamba aligned.
SERVING = {"mamba_cache_mode": "align"}
# An MLA-format cache: one latent vector of kv_lora_rank 512 + rope 64 (DeepSeek's), no separate V.
MLA = {"num_kv_heads": 1, "head_size": 576}


class NotBuildable(Exception):
    """This vLLM cannot express the case."""


def describe_error(error: BaseException) -> str:
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# --------------------------------------------------------------------------- specs


def is_mla_format(cls: type, interface: Any) -> bool:
    """MLA's subclasses, and the spec classes named for the MLA cache format (SlidingWindowMLASpec derives from
    SlidingWindowSpec, not from MLAAttentionSpec)."""
    mla = getattr(interface, "MLAAttentionSpec", None)
    return (mla is not None and issubclass(cls, mla)) or "MLA" in cls.__name__


def wanted_fields(cls: type, params: dict[str, Any], interface: Any) -> dict[str, Any]:
    """The fields of one layer's spec: the defaults, the MLA format's, the variant's shape, the census's literals."""
    required = {field.name for field in dataclasses.fields(cls) if field.init and _required(field)}
    wanted = {name: value for name, value in REQUIRED.items() if name in required} | SERVING
    if is_mla_format(cls, interface):
        wanted.update(MLA)
    variant = int(params.get("variant", 0))
    if variant:
        # A further distinct layer of one class: a compact cache of one head in uint8, as DeepSeek-V3.2's indexer
        # (fp8 keys of 128 dims plus 4 bytes of scale per 128: 132), each further variant 4 bytes wider.
        wanted.update(num_kv_heads=1, head_size=128 + 4 * variant, dtype="uint8")
        wanted["shapes"] = ((2, 64 * (variant + 1)), (4, 16, 16))
    wanted.update({key: value for key, value in params.items() if key != "variant" and ":" not in key})
    for field in dataclasses.fields(cls):
        number = params.get(f"setting:{field.name}")
        if number is not None and field.name not in wanted:
            wanted.update(setting_stand_in(field, int(number)))
    return wanted


def setting_stand_in(field: dataclasses.Field, number: int) -> dict[str, Any]:
    """A value for a setting the layer classes write apart (the census cannot read it: the config's), the
    `number`th way of writing it: a string or a number by the field's type; nothing for another type."""
    kind = str(field.type)
    if "str" in kind:
        return {field.name: f"kvlint-setting-{number}"}
    if "int" in kind and "bool" not in kind:
        return {field.name: 1000 + number}
    return {}


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING  # type: ignore[misc]


def construct(cls: type, wanted: dict[str, Any], torch: Any) -> Any:
    """A spec dataclass from the wanted fields it has (names of dtypes and enum members turned into them)."""
    if not dataclasses.is_dataclass(cls):
        raise NotBuildable(f"{cls.__name__} is not a dataclass")
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    missing = [name for name, field in fields.items() if name not in wanted and _required(field)]
    if missing:
        raise NotBuildable(f"{cls.__name__} needs {', '.join(missing)} (unknown to kvlint)")
    values = {}
    for name, value in wanted.items():
        if name not in fields:
            continue
        if name == "dtype":
            value = getattr(torch, value)
        elif name == "dtypes":
            value = tuple(getattr(torch, item) for item in value)
        elif name == "shapes":
            value = tuple(tuple(shape) for shape in value)
        elif isinstance(fields[name].default, enum.Enum) and isinstance(value, str):
            members = type(fields[name].default).__members__
            if value not in members:
                raise NotBuildable(f"{cls.__name__}.{name} has no member {value}")
            value = members[value]
        values[name] = value
    return cls(**values)


def build_specs(case: dict[str, Any], interface: Any, torch: Any) -> dict[str, Any]:
    specs = {}
    for layer in case["layers"]:
        cls = getattr(interface, layer["spec_class"], None)
        if cls is None:
            raise NotBuildable(f"{INTERFACE} has no {layer['spec_class']}")
        specs[layer["name"]] = construct(cls, wanted_fields(cls, layer["params"], interface), torch)
    return pad_mamba_pages(specs, interface)


def pad_mamba_pages(specs: dict[str, Any], interface: Any) -> dict[str, Any]:
    """Mamba pages padded to the widest attention page, as the platform's `_align_hybrid_block_size` leaves a
    hybrid model (it sets one `mamba_page_size_padded` for every Mamba layer)."""
    mamba = getattr(interface, "MambaSpec", None)
    if mamba is None:
        return specs
    attention = [spec.page_size_bytes for spec in specs.values() if not isinstance(spec, mamba)]
    if not attention or len(attention) == len(specs):
        return specs
    page = max(attention)
    return {
        name: dataclasses.replace(spec, page_size_padded=page)
        if isinstance(spec, mamba) and "page_size_padded" in {f.name for f in dataclasses.fields(spec)}
        else spec
        for name, spec in specs.items()
    }


# ------------------------------------------------------------------- the tree's code


def defines_at_module_level(text: str, name: str) -> bool:
    """Whether a module's text defines function `name` at its top level (a method of that name does not)."""
    return any(line.startswith(f"def {name}(") for line in text.splitlines())


def find_grouping_function(vllm_location: str) -> Any:
    """`get_kv_cache_groups` wherever the tree defines it under vllm/v1/core (its home moves between releases):
    the module-level function, not a method of the same name (0.34.0's config builder has one)."""
    core = os.path.join(vllm_location, "v1", "core")
    for module in sorted(pkgutil.iter_modules([core]), key=lambda m: m.name):
        path = os.path.join(core, f"{module.name}.py")
        try:
            with open(path, encoding="utf-8") as handle:
                defines = defines_at_module_level(handle.read(), GROUPING_FUNCTION)
        except OSError:
            continue
        if defines:
            return getattr(importlib.import_module(f"vllm.v1.core.{module.name}"), GROUPING_FUNCTION)
    raise NotBuildable(f"no module under vllm/v1/core defines {GROUPING_FUNCTION}")


def build_config(config_module: Any) -> Any:
    """A minimal real VllmConfig: a CPU device (none is inferred here), HMA on as on a GPU platform."""
    pieces: dict[str, Any] = {"cache_config": config_module.CacheConfig(block_size=BLOCK_SIZE)}
    if hasattr(config_module, "DeviceConfig"):
        pieces["device_config"] = config_module.DeviceConfig(device="cpu")
    config = config_module.VllmConfig(**pieces)
    config.scheduler_config.disable_hybrid_kv_cache_manager = False
    return config


def resolve_layout(config: Any, case: dict[str, Any], specs: dict[str, Any]) -> str | None:
    """The layout the engine core picks for the model's backends (None: a tree without layouts)."""
    cache_config = config.cache_config
    if not hasattr(cache_config, "kv_cache_layout"):
        return None
    try:
        utils = importlib.import_module(LAYOUT_RESOLUTION)
        layout_enum = importlib.import_module("vllm.v1.kv_cache_layout").KVCacheLayout
    except ImportError:
        return None
    supported = getattr(utils, "get_supported_kv_cache_layouts", None)
    resolve = getattr(utils, "resolve_kv_cache_layout", None)
    if supported is None or resolve is None:
        return None
    backends = []
    for layouts in {tuple(layer["layouts"]) if layer["layouts"] else None for layer in case["layers"]}:
        declared = None if layouts is None else tuple(layout_enum[name] for name in layouts)
        backends.append(type("CensusBackend", (), {"supported_kv_cache_layouts": _declaring(declared)}))
    cache_config.kv_cache_layout = None
    names = [layout.name for layout in supported(backends)]
    layout = resolve(config, [names], list(specs.values()))
    cache_config.kv_cache_layout = layout.name
    return layout.name


def _declaring(layouts: tuple | None) -> classmethod:
    return classmethod(lambda cls: layouts)


def group_case(case: dict[str, Any], modules: dict[str, Any]) -> dict[str, Any]:
    interface, torch = modules["interface"], modules["torch"]
    try:
        specs = build_specs(case, interface, torch)
    except NotBuildable as error:
        return {"model": case["model"], "not_buildable": str(error)}
    except Exception as error:  # a spec this vLLM refuses with kvlint's parameters
        return {"model": case["model"], "not_buildable": f"cannot build its specs: {describe_error(error)}"}
    container = interface.UniformTypeKVCacheSpecs
    result: dict[str, Any] = {"model": case["model"]}
    try:
        result["layout"] = resolve_layout(modules["vllm_config"], case, specs)
        groups = modules["grouping"](modules["vllm_config"], dict(specs))
    except Exception as error:
        result["error"] = describe_error(error)
        return result
    result["groups"] = len(groups)
    result["containers"] = sorted(
        sorted({type(spec).__name__ for spec in group.kv_cache_spec.kv_cache_specs.values()})
        for group in groups
        if isinstance(group.kv_cache_spec, container)
    )
    return result


# ---------------------------------------------------------------------- importing


def import_tree(vllm_path: str | None) -> dict[str, Any]:
    if vllm_path is not None:
        root = os.path.abspath(vllm_path)
        if not os.path.isfile(os.path.join(root, "vllm", "__init__.py")):
            raise ImportError(f"{root} holds no vllm package (expected {root}/vllm/__init__.py)")
        sys.path.insert(0, root)
    import vllm  # noqa: F401  - the tree under test

    location = os.path.dirname(os.path.abspath(vllm.__file__))
    if vllm_path is not None and os.path.dirname(location) != os.path.abspath(vllm_path):
        raise ImportError(f"imported vllm from {location}, not from {vllm_path}")
    return {
        "vllm": vllm,
        "location": location,
        "torch": importlib.import_module("torch"),
        "config": importlib.import_module("vllm.config"),
        "interface": importlib.import_module(INTERFACE),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--vllm", default=None, help="directory holding the vllm package")
    parser.add_argument("--cases", required=True, help="JSON file of the census's cases")
    arguments = parser.parse_args(argv)
    os.environ.pop("VLLM_KV_CACHE_LAYOUT", None)  # the default layout, not the caller's choice
    result: dict[str, Any]
    try:
        modules = import_tree(arguments.vllm)
    except BaseException as error:  # any failure to import is "the tree cannot be imported"
        result = {"import_error": describe_error(error)}
    else:
        result = {
            "vllm": {"version": getattr(modules["vllm"], "__version__", "unknown"), "path": modules["location"]},
            "python": sys.version.split()[0],
        }
        try:
            with open(arguments.cases, encoding="utf-8") as handle:
                cases = json.load(handle)["cases"]
            try:
                modules["grouping"] = find_grouping_function(modules["location"])
                modules["vllm_config"] = build_config(modules["config"])
            except Exception as error:  # every model alike: the tree's grouping cannot be called here
                reason = str(error) if isinstance(error, NotBuildable) else describe_error(error)
                result["models"] = [{"model": case["model"], "not_buildable": reason} for case in cases]
            else:
                result["models"] = [group_case(case, modules) for case in cases]
        except Exception as error:
            result["internal_error"] = describe_error(error)
            result["traceback"] = traceback.format_exc()
    with open(arguments.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
