"""What chooses a layer's spec class, and which calls choose it (kvlint.analysis.census.spec_branches and
.spec_parameters): a per-layer argument configures a model's layers of one class apart only when it reaches the
attribute their `get_kv_cache_spec` tests, and a call leaving that attribute to its None default never builds
the other branch's spec. Each test is a miniature tree, named after the behaviour it proves."""

from __future__ import annotations

import textwrap

from kvlint.analysis.census.compositions import checkpoint_key, checkpoints
from kvlint.analysis.census.spec_branches import spec_branching
from tests.test_intent_census import census_of

# 0.29.0's MLAAttention in miniature: the window chooses the spec; `sparse` and the dtype tests (one deciding a
# spec's argument, one in its arguments) choose nothing.
LAYER = """
from vllm.model_executor.layers.attention import Attention, Mamba


class Windowed(AttentionLayerBase):
    def __init__(self, config, sparse=False, sliding_window=None, prefix=""):
        self.sparse = sparse
        self.sliding_window = sliding_window
        self.dtype = config.dtype

    def get_kv_cache_spec(self, vllm_config):
        scale = None
        if self.dtype == "fp8":
            scale = 2.0
        if self.sliding_window is not None:
            return SlidingWindowSpec(block_size=16, scale=scale)
        return FullAttentionSpec(block_size=16, extra=656 if self.dtype == "fp8" else None)


class Sub(Windowed):
    def __init__(self, config, window, **kwargs):
        local = window
        super().__init__(config, sliding_window=local, **kwargs)


class Passes(Windowed):
    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
"""
FULL, SLIDING = "Windowed:FullAttentionSpec", "Windowed:SlidingWindowSpec"
MIXED = ("Mamba:MambaSpec", FULL, SLIDING)


def _checkpoints(model: str) -> set[tuple[str, ...]]:
    census = census_of(LAYER + textwrap.dedent(model))
    return {checkpoint_key(kinds) for m in census.models for kinds in checkpoints(census, m)}


def _model(call: str) -> str:
    return f"""
    class M:
        def __init__(self, config, prefix=""):
            self.attn = [{call} for i in range(config.n)]
            self.mixer = Mamba()
    """


def test_a_per_layer_argument_the_spec_choice_never_reads_configures_no_layer_apart():
    # 0.29.0's LongcatFlash: `use_sparse` given per layer to MLAAttention, whose spec reads only its window.
    found = _checkpoints(_model("Windowed(config, sparse=config.sparse[i], sliding_window=config.window)"))
    assert ("Mamba:MambaSpec", SLIDING) in found and MIXED not in found
    # The window itself given per layer (Gemma-style): both specs in one checkpoint.
    assert MIXED in _checkpoints(_model("Windowed(config, sliding_window=config.windows[i])"))


def test_a_call_leaving_the_window_to_its_none_default_never_builds_the_sliding_spec():
    found = _checkpoints(_model("Windowed(config, sparse=config.sparse[i])"))
    assert found == {("Mamba:MambaSpec", FULL)}
    # An explicit None is no value either; a config's window may be set.
    assert _checkpoints(_model("Windowed(config, sliding_window=None)")) == {("Mamba:MambaSpec", FULL)}
    assert ("Mamba:MambaSpec", SLIDING) in _checkpoints(_model("Windowed(config, sliding_window=config.window)"))


def test_the_window_is_traced_through_a_subclass_constructor_and_its_locals():
    sub = {frozenset(k) for k in _checkpoints(_model("Sub(config, window=config.windows[i])"))}
    assert frozenset({"Mamba:MambaSpec", "Sub:FullAttentionSpec", "Sub:SlidingWindowSpec"}) in sub
    # Handed on through `**kwargs` under its own name.
    passes = {frozenset(k) for k in _checkpoints(_model("Passes(config, sliding_window=config.windows[i])"))}
    assert frozenset({"Mamba:MambaSpec", "Passes:FullAttentionSpec", "Passes:SlidingWindowSpec"}) in passes
    apart_by_sparse = _checkpoints(_model("Sub(config, window=config.window, sparse=config.sparse[i])"))
    assert not any("Sub:FullAttentionSpec" in k and "Sub:SlidingWindowSpec" in k for k in apart_by_sparse)


def test_a_test_in_a_specs_arguments_chooses_nothing_and_a_call_of_the_layers_own_is_untraced():
    method = textwrap.dedent(LAYER).split("    def get_kv_cache_spec", 1)[1].split("\n\n\nclass Sub")[0]
    text = "    def get_kv_cache_spec" + method
    specs = frozenset({"FullAttentionSpec", "SlidingWindowSpec"})
    branching = spec_branching([text], specs)
    assert branching.attributes == {"sliding_window"}
    assert dict(branching.when_none) == {"sliding_window": {"FullAttentionSpec"}}
    untraced = spec_branching([text.replace("self.sliding_window is not None", "self.windowed()")], specs)
    assert untraced.attributes is None
    # A test leaving the method (`return None`: no KV cache) chooses too.
    leaves = text.replace(
        "if self.sliding_window", "if self.encoder:\n            return None\n        if self.sliding_window"
    )
    assert spec_branching([leaves], specs).attributes == {"sliding_window", "encoder"}


def test_a_window_assigned_under_a_per_layer_test_is_per_layer():
    # 0.29.0's Cohere2-MoE: `self.sliding_window = None`, then set only when the layer's type (read from its
    # position) is sliding: control dependence makes the attribute per layer.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            self.idx = int(prefix.split(".")[-1])
            self.window = None
            if config.layer_types[self.idx] == "sliding":
                self.window = config.window
            self.attn = Windowed(config, sliding_window=self.window)
            self.mixer = Mamba()
    """
    assert MIXED in _checkpoints(model)
    assert MIXED not in _checkpoints(model.replace('config.layer_types[self.idx] == "sliding"', "config.sliding"))


def test_a_per_layer_method_test_choosing_two_calls_with_apart_windows_configures_them_apart():
    # 0.29.0's MiMo-V2: `if self.is_compressed_softmax_layer():` (a method reading `self.layer_id`, set from the
    # position) chooses between two calls that give the window apart values.
    model = """
    class Inner:
        def __init__(self, config, window_size=-1, prefix=""):
            window = window_size if window_size > -1 else None
            self.attn = Windowed(config, sliding_window=window)

    class M:
        def __init__(self, config, prefix=""):
            self.layer_id = int(prefix.split(".")[-1])
            if self.is_compressed():
                self.inner = Inner(config, window_size=config.window, prefix=prefix)
            else:
                self.inner = Inner(config, window_size=-1, prefix=prefix)
            self.mixer = Mamba()

        def is_compressed(self):
            return self.config.pattern[self.layer_id] == 1
    """
    assert MIXED in _checkpoints(model)
    # The same test on the model's config: one way in every layer.
    assert MIXED not in _checkpoints(model.replace("self.config.pattern[self.layer_id] == 1", "self.config.c"))
    # Both ways giving the same window: nothing apart.
    same = model.replace("window_size=-1, prefix=prefix)", "window_size=config.window, prefix=prefix)")
    assert MIXED not in _checkpoints(same)


def test_a_local_assigned_once_under_a_per_layer_test_is_the_same_in_every_layer_that_has_it():
    # 0.34.0's Kimi-Linear: under `if config.is_kda_layer(layer_idx):`, `kda_config = config.linear_attn_config`,
    # then `if kda_config.get("use_full_rank_gate")` picks one of two KDA classes for the whole model.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            layer_idx = int(prefix.split(".")[-1])
            if config.is_kda_layer(layer_idx):
                kda = config.linear
                if kda.get("full_rank"):
                    self.attn = Windowed(config, sliding_window=config.window)
                else:
                    self.attn = Mamba()
    """
    found = {frozenset(k) for k in _checkpoints(model)}
    assert not any("Mamba:MambaSpec" in k and any(n.startswith("Windowed") for n in k) for k in found)


# ------------------------------------------------------------------ branches a caller's constant decides

ATTENTION_TYPED = """
class Typed:
    def __init__(self, config, attn_type=AttentionType.DECODER, prefix=""):
        self.attn_type = attn_type
        if self.attn_type == AttentionType.ENCODER_DECODER:
            self.attn = Mamba()
        elif attn_type in (AttentionType.ENCODER, AttentionType.ENCODER_ONLY):
            self.attn = None
        else:
            self.attn = Windowed(config)
"""


def _layers(model: str) -> set[frozenset[str]]:
    census = census_of(LAYER + ATTENTION_TYPED + textwrap.dedent(model))
    return {frozenset(alternative) for m in census.models for alternative in m.alternatives}


def test_a_branch_on_a_parameter_its_caller_gives_a_constant_is_decided():
    # 0.30.0's Ultravox: its Whisper encoder builds `WhisperAttention(attn_type=AttentionType.ENCODER)`, never the
    # cross-attention branch; Whisper's decoder builds both kinds, each with its own constant.
    encoder = "class M:\n    def __init__(self, config, prefix=''):\n        self.a = Typed(config, attn_type=AttentionType.ENCODER)\n"
    assert _layers(encoder) == set()
    cross = encoder.replace("AttentionType.ENCODER)", "AttentionType.ENCODER_DECODER)")
    assert _layers(cross) == {frozenset({"Mamba"})}
    # Not passed: its default (DECODER); given from the config: undecided, every way.
    assert _layers(encoder.replace(", attn_type=AttentionType.ENCODER", "")) == {frozenset({"Windowed"})}
    from_config = encoder.replace("AttentionType.ENCODER)", "config.kind)")
    assert _layers(from_config) == {frozenset({"Mamba"}), frozenset({"Windowed"})}
    # Handed on through `**kwargs`: what it holds is not known here, so not its default either.
    kwargs = "class M:\n    def __init__(self, config, prefix='', **kw):\n        self.a = Typed(config, **kw)\n"
    assert _layers(kwargs) == {frozenset({"Mamba"}), frozenset({"Windowed"})}


def test_a_branch_comparing_a_parameter_with_a_literal_its_caller_gives_another_literal_is_decided():
    model = """
    class Kinded:
        def __init__(self, config, kind="self"):
            if kind == "cross":
                self.attn = Mamba()
            else:
                self.attn = Windowed(config)

    class M:
        def __init__(self, config, prefix=""):
            self.a = Kinded(config, kind="self")
    """
    assert _layers(model) == {frozenset({"Windowed"})}
    assert _layers(model.replace('kind="self")\n', 'kind="cross")\n')) == {frozenset({"Mamba"})}


def test_a_class_only_named_is_followed_with_its_arguments_unknown_not_with_its_defaults():
    # Called elsewhere through a local (`cls = Typed; cls(…, attn_type=…ENCODER_DECODER)`): its default (DECODER)
    # must not decide its branches.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            cls = Typed
            self.a = cls(config, attn_type=AttentionType.ENCODER_DECODER)
    """
    assert frozenset({"Mamba"}) in _layers(model)


def test_the_census_program_is_freed_when_dropped_not_left_to_the_cycle_collector():
    # A reference cycle through the Program kept every syntax tree the census parsed alive past the index build,
    # frozen into each worker of a scan (≈ 230 MiB of the process tree on vLLM 0.34.0).
    import gc
    import weakref

    from kvlint.analysis.census.budget import Budget
    from kvlint.analysis.census.instantiation import Program
    from kvlint.analysis.census.reading import model_layers

    texts = {"m.py": (LAYER + textwrap.dedent(_model("Windowed(config, sparse=config.sparse[i])"))).encode()}
    branching = spec_branching(["    def get_kv_cache_spec(self, c):\n        return None"], frozenset())
    gc.disable()
    try:
        program = Program(texts, {"Windowed": branching, "Mamba": None}, Budget())
        assert model_layers(program, "m.py", "M") is not None
        freed = weakref.ref(program)
        del program
        assert freed() is None
    finally:
        gc.enable()
