"""The mutants of scripts/mutation.py that no behaviour can tell apart from the code, each with the reason:
they are not run and not counted. Kept apart from the gate so that the list can grow without the gate."""

from __future__ import annotations

# (module, line, operator) → why the mutant cannot change behaviour; it is then not counted.
EQUIVALENT: dict[tuple[str, int, str], str] = {
    ("kvlint/analysis/census/skeletons.py", 93, "2 -> 3"): "the size of a cache: one class more kept parsed, "
    "the same statements either way",
    ("kvlint/analysis/census/may_build.py", 119, "1 -> 2"): "the sieve then follows a submodule's submodules "
    "too (an empty module's first line): it says 'could' more often, never less; the walk decides, the census "
    "is the same",
    ("kvlint/analysis/census/instantiation.py", 301, "if-branch never taken"): "a fast exit: a class the sieve "
    "says builds no layer, walked, builds none (may_build reads a superset of what the walk reads)",
    (
        "kvlint/analysis/census/may_build.py",
        52,
        "if-branch never taken",
    ): "a fast exit: a layer class's own text names it (`class X`), so reading it answers the same",
    (
        "kvlint/analysis/census/may_build.py",
        83,
        "if-branch never taken",
    ): "a cache: a definition answered by an earlier question is read again and answers the same",
    (
        "kvlint/analysis/census/may_build.py",
        135,
        "1 -> 2",
    ): "a Deferred's key then differs from its parsed statement's: the definition, once parsed, is read again and answers the same",
    (
        "kvlint/analysis/census/may_build.py",
        137,
        "0 -> 1",
    ): "a default never used: every definition and value the bindings hold has a line",
    (
        "kvlint/analysis/census/may_build.py",
        139,
        "1 -> 2",
    ): "a key's third part only tells a definition (-1) from a value (its column): -2 tells it as well",
    (
        "kvlint/analysis/census/may_build.py",
        139,
        "0 -> 1",
    ): "a default never used: every value the bindings hold has a column",
    (
        "kvlint/analysis/census/may_build.py",
        128,
        "1 -> 2",
    ): "a default never used: every definition and value the bindings hold has a line",
    (
        "kvlint/analysis/census/skeletons.py",
        45,
        "if-branch never taken",
    ): "a fast exit: a class with no method to stub parses to the whole "
    "class (its end is set from its text, the line a whole parse gives; no reader asks its end column)",
    (
        "kvlint/analysis/census/skeletons.py",
        76,
        "is -> is not",
    ): "which stub keeps its source after `complete`: the stub replaced in the body is "
    "read by nothing; one that failed is tried again (None again)",
    (
        "kvlint/analysis/census/skeletons.py",
        86,
        "and -> or",
    ): "the first statement of a `class _:` whose body is the method's text is that `def`",
    ("kvlint/analysis/census/quotes.py", 19, "0 -> 1"): "the line a string opened on is set when one opens, "
    "before it is read: its first value is never read (the other zeros, the line and the offset, are)",
    ("kvlint/analysis/census/class_texts.py", 42, "False -> True"): "a dataclass field shown in its repr: "
    "what a debugger prints, nothing the census reads",
    ("kvlint/analysis/census/class_texts.py", 43, "False -> True"): "a dataclass field shown in its repr: "
    "what a debugger prints, nothing the census reads",
    ("kvlint/analysis/census/class_texts.py", 44, "False -> True"): "a dataclass field shown in its repr: "
    "what a debugger prints, nothing the census reads",
    ("kvlint/analysis/census/class_texts.py", 74, "> -> >="): "a def at the class's own indentation ends its "
    "block (_block_end), so no line of the body is at that depth",
    ("kvlint/analysis/census/class_texts.py", 143, "if-branch never taken"): "a fast path: an attribute the body "
    "does not mention matches neither pattern",
    ("kvlint/analysis/census/class_texts.py", 146, "4 -> 5"): "the default depth is used only when every body line "
    "is blank or a comment, where no line assigns the attribute at any depth",
    ("kvlint/analysis/construction_sites.py", 76, "if-branch never taken"): "a fast exit: with no candidate "
    "called, every module names none, none is read",
    ("kvlint/analysis/construction_sites.py", 78, "2 -> 3"): "a finer reading key (the micro version too): a "
    "kept answer is reused less often, never wrongly",
    ("kvlint/analysis/construction_sites.py", 78, "8 -> 9"): "a digest's size: any size tells two readings apart",
    ("kvlint/analysis/construction_sites.py", 97, "16 -> 17"): "a digest's size: any size tells two texts apart "
    "here as well",
    ("kvlint/analysis/construction_sites.py", 115, "if-branch never taken"): "a fast exit: over no text, or for "
    "no name, the pattern finds no candidate's call (with no name it finds only the empty word, no candidate's)",
    ("kvlint/analysis/construction_sites.py", 115, "or -> and"): "the same fast exit taken less often: over no "
    "text, or for no name, the pattern finds no candidate's call",
    ("kvlint/analysis/construction_sites.py", 143, ">= -> >"): "`find` from a class's end, past its `class` "
    "line (offset 1 or more): it returns -1 or an offset of at least 1",
    ("kvlint/analysis/construction_sites.py", 143, "0 -> 1"): "`find` from a class's end, past its `class` "
    "line (offset 1 or more): it returns -1 or an offset of at least 1",
    ("kvlint/analysis/construction_sites.py", 144, ">= -> >"): "`find` from a class's end, past its `class` "
    "line (offset 1 or more): it returns -1 or an offset of at least 1",
    ("kvlint/analysis/construction_sites.py", 144, "0 -> 1"): "`find` from a class's end, past its `class` "
    "line (offset 1 or more): it returns -1 or an offset of at least 1",
    ("kvlint/analysis/census/budget.py", 11, "400000000 -> 400000001"): "the census's budget: a bound against "
    "crafted trees, its size a cost, not a decision (its own tests bound it)",
    ("kvlint/analysis/census/layouts.py", 17, "if-branch never taken"): "a fast path: a module without the "
    "method's name defines no class with it",
    ("kvlint/analysis/census/merges.py", 37, "if-branch never taken"): "a fast path: a module that defines neither "
    "a merge nor a spec class adds no merge and no base",
    ("kvlint/analysis/census/merges.py", 37, "not in -> in"): "the modules it then skips define a merge but no "
    "spec class, so add nothing; those it then reads define no merge, so add only their spec classes' bases, "
    "as before",
    (
        "kvlint/engine/suppress.py",
        29,
        "if-branch never taken",
    ): "a fast path: a source without the word holds no directive",
    (
        "kvlint/analysis/flow/dominance.py",
        54,
        "and -> or",
    ): "a guard that only saves work: `_exits` is False for all it lets through (an expression, an `else` or "
    "`elif` clause, None), none of them a block ending in an exit",
    ("kvlint/analysis/flow/layer_selection.py", 230, "1 -> 2"): "a maxsplit: a checkpoint's kind is `Layer:Spec`, "
    "one colon, so the part after it is the same",
    ("kvlint/analysis/flow/layer_selection.py", 189, "0 -> 1"): "every layer set's count shifted by one: the order of "
    "witnesses, which alone uses it, is the same",
    ("kvlint/analysis/flow/layer_selection.py", 189, "1 -> 2"): "every count doubled: the same order of witnesses",
    ("kvlint/analysis/flow/layer_selection.py", 194, "0 -> 1"): "without a census every witness is equally near: "
    "any constant gives the same order",
    ("kvlint/analysis/flow/layer_selection.py", 205, "0 -> 1"): "a composition always has layers: the default of "
    "an empty max is never read",
    ("kvlint/analysis/flow/consumers.py", 53, "if-branch never taken"): "a fast path: with no accessor the empty "
    "pattern's reads name no accessor, and none is consumed",
    ("kvlint/analysis/flow/consumers.py", 61, "if-branch never taken"): "a fast path: a name read by the worker "
    "once stays so",
    ("kvlint/analysis/flow/consumers.py", 96, ">= -> >"): "a newline at offset 0 is an empty first line: nothing "
    "above line 2 encloses it, whichever start and indent its reads are given",
    ("kvlint/analysis/flow/consumers.py", 96, "0 -> 1"): "a newline at offset 0 is an empty first line: nothing "
    "above line 2 encloses it, whichever start and indent its reads are given",
    ("kvlint/analysis/flow/consumers.py", 100, "< -> <="): "a class on the read's own line is indented as that "
    "line, so the bisection leaves it out; passed a line early, the stack is the same for the lines after",
    ("kvlint/analysis/census/compositions.py", 67, "1 -> 2"): "a maxsplit: the first part is the same",
    ("kvlint/analysis/census/compositions.py", 70, "1 -> 2"): "a maxsplit from the right: the last part is the same",
    ("kvlint/analysis/census/compositions.py", 58, "False -> True"): "a default compose never uses: every "
    "composition it builds sets `alone` from its checkpoint",
    ("kvlint/analysis/census/compositions.py", 84, "0 -> 1"): "a composition always has layers: the default of "
    "an empty max is never read",
    ("kvlint/analysis/census_selection.py", 46, "0 -> 1"): "every line counted one later: a fingerprint is compared "
    "only with another made by the same code, which tells the same changes apart",
    ("kvlint/analysis/census_selection.py", 50, "16 -> 17"): "the fingerprint's length: a longer prefix of the "
    "same digest tells the same changes apart",
    ("kvlint/analysis/census/reading.py", 230, "if-branch never taken"): "a fast path: a module without the "
    "words has no match of the method's pattern either",
    ("kvlint/analysis/census/reading.py", 233, "1 -> 2"): "every definition's line one later: no class "
    "statement shares a line with the def it holds, so `c.line < line` picks the same classes",
    ("kvlint/analysis/census/reading.py", 236, "< -> <="): "no class statement shares a line with the def it "
    "holds: `c.line <= line` picks the same classes",
    ("kvlint/analysis/census/reading.py", 74, "False -> True"): "a default the census never uses: its one "
    "construction of Model passes `built.merged`",
    ("kvlint/analysis/census/reading.py", 263, "> -> >="): "a layer of one spec class has nothing to choose: "
    "a branching read for it changes what a call records (Built.varied, Built.specs) but no checkpoint, whose "
    "one spec class is the same either way",
    ("kvlint/analysis/census/merges.py", 132, "1 -> 2"): "a maxsplit: the part before the first `#` is the same",
    ("kvlint/analysis/census/paths.py", 185, "1 -> 2"): "a maxsplit: the first line is the same",
    ("kvlint/analysis/census/paths.py", 165, "4000 -> 4001"): "a bound on the text read for a filter, "
    "against crafted modules: its size is a cost, not a decision",
    ("kvlint/analysis/census/built.py", 116, "if-branch never taken"): "a fast path: the product with what "
    "builds nothing (one empty alternative, no sites) is the other side, as the general case computes it",
    ("kvlint/analysis/census/built.py", 38, "if-branch never taken"): "a part shared by two unions read once: "
    "a cost; its set joined twice is the same set",
    ("kvlint/analysis/census/built.py", 152, "<= -> <"): "which of two equal-sized call maps is the larger: "
    "each class's joined site is the same either way",
    ("kvlint/analysis/census/built.py", 116, "or -> and"): "the fast path then taken only when both sides build "
    "nothing, and the general case gives the same otherwise",
    ("kvlint/analysis/census/instantiation.py", 135, "if-branch never taken"): "a guard never taken: every "
    "function the census follows is reached from a class's constructor (model_layers starts at the model's "
    "class), so an instance is on the stack",
    ("kvlint/analysis/census/instantiation.py", 215, "if-branch never taken"): "a guard never taken: a branch "
    "test is read only in the body of a function the census follows, which is on the stack",
    ("kvlint/analysis/census/instantiation.py", 216, "False -> True"): "the line under the guard of line 215, "
    "which never runs",
    ("kvlint/analysis/census/resolution.py", 103, "if-branch never taken"): "a cache: a name resolved again "
    "(the memo of `resolve`) resolves to the same through `binding_expr`",
    ("kvlint/analysis/census/resolution.py", 47, "if-branch never taken"): "a cache: the bindings read "
    "again are the same",
    ("kvlint/analysis/census/instantiation.py", 105, "if-branch never taken"): "a cache: the constructor "
    "read again builds the same (only the budget, not the answer, tells)",
    ("kvlint/analysis/census/instantiation.py", 176, "if-branch never taken"): "a cache, as for constructors",
    ("kvlint/analysis/census/instantiation.py", 299, "if-branch never taken"): "a fast path: `resolve_expr` "
    "resolves no attribute of anything but a name, so the reference builds nothing either way",
    ("kvlint/analysis/census/instantiation.py", 285, "if-branch never taken"): "a lambda read as any other "
    "expression visits the same child, its body (its defaults are read by neither)",
    ("kvlint/analysis/census/instantiation.py", 170, "1000 -> 1001"): "what one constructor costs the "
    "budget: a unit, not a decision (the budget's own tests bound it)",
    ("rules/_fix_scope.py", 90, "1 -> 2"): "a binding of the name other than the helper's own import counted "
    "twice: only whether every binding is the meant one (`bindings == meant`) decides, and each other binding "
    "already makes them differ",
    ("rules/_fix_scope.py", 147, "is not -> is"): "a block's last statement when compound is no exit "
    "statement either way (`[last]` or `[]`), and a block is never empty",
    ("rules/_fix_scope.py", 214, "is -> is not"): "which of the module, None or an enclosing function a "
    "function's owner is when not a class decides nothing: only a class owner is told apart",
    ("rules/_unwrap_fix.py", 233, "if-branch never taken"): "a fast exit: an expression that is not a name "
    "has no binding (`bindings_of` looks its `.value` node up among names and finds none)",
    ("rules/_unwrap_fix.py", 236, "or -> and"): "a binding has both a parameter and its function or neither "
    "(kvlint.analysis.flow.provenance sets them together)",
    ("rules/_unwrap_fix.py", 319, "< -> <="): "the loops follow the skipped space: a code character is always "
    "found before the end of the source",
    ("rules/_unwrap_fix.py", 351, "any -> all"): "outside the interface module a module defining the name has "
    "the rewrite blocked (kvlint.rules._fix_scope.rebinding), and inside it nothing is imported either way",
    ("rules/_unwrap_fix.py", 365, "1 -> 2"): "a maxsplit: the last part is the same",
    ("rules/kv101_container_isinstance.py", 328, "if-branch never taken"): "a fast exit: with no layer class "
    "checked the next test returns (no container holds one), and a test that admits the container answers a "
    "container True, as its layers do, so no built container is a counterexample",
    ("rules/kv101_container_isinstance.py", 328, "or -> and"): "the same fast exit: each of its two cases alone "
    "ends with no finding further on",
    ("kvlint/engine/grouping.py", 278, "if-branch never taken"): "a fast path: with nothing folded the primary "
    "is rebuilt with its own fix and note and its related locations sorted, which rules add in file order",
    ("kvlint/analysis/layer_mixes.py", 18, "if-branch never taken"): "imports only annotations name, and "
    "`from __future__ import annotations` evaluates none",
    ("kvlint/analysis/layer_mixes.py", 18, "if-condition negated"): "the same imports made at run time: no "
    "cycle, and nothing but annotations names them",
    ("kvlint/analysis/layer_mixes.py", 50, "if-branch never taken"): "a fast exit: a root has no parent or only "
    "a root, so the walk returns it too",
    ("kvlint/analysis/census/paths.py", 313, "1 -> 2"): "a maxsplit: the first line is the same",
    ("kvlint/analysis/census/paths.py", 323, "False -> True"): "the classes held read again at every call: the "
    "same set as when nothing changed",
    ("kvlint/analysis/census/paths.py", 349, ">= -> >"): "an assignment starts at a word, never at a line's end "
    "(its newline), where the last call's line ends",
    ("kvlint/analysis/census/paths.py", 361, "> -> >="): "two finds of different characters never meet at one offset",
    ("kvlint/analysis/census/paths.py", 370, "> -> >="): "at the line's start the blank read back is the newline "
    "before it, and the window is cut at the line's start either way",
    ("kvlint/analysis/census/paths.py", 370, "and -> or"): "blanks and word read back to the line's start (and "
    "past it): the window is cut there, the whole line up to the name, as the reading before this one searched it",
    ("kvlint/analysis/census/paths.py", 372, "4 -> 5"): "a window one character wider: `\\b` reads only the "
    "character before `def`",
    ("kvlint/analysis/census/ancestry.py", 31, "10000 -> 10001"): "a cost charged per class a walk reads: no "
    "release walks, and a crafted module stops at the budget either way",
    ("kvlint/analysis/census/ancestry.py", 126, "0 -> 1"): "the reach of a walk that found nothing, which no "
    "composition reads (an answer with nothing found and not settled bears on nothing)",
    ("kvlint/analysis/census/ancestry.py", 174, "> -> >="): "one settled base then walked instead of joined: the "
    "walk gives the answer the join would",
    ("kvlint/analysis/census/paths.py", 181, "1 -> 2"): "only a value opening `{{` differs, a set of dicts "
    "or a dict keyed by one: unhashable, no working code holds it",
    ("kvlint/analysis/census/paths.py", 182, "> -> >="): "two finds of different characters never meet at one offset",
    ("kvlint/analysis/census/paths.py", 183, "1 -> 2"): "one character more after the closing brace: no filter's "
    "`if … isinstance(` fits in it",
    ("kvlint/analysis/census/paths.py", 202, "and -> or"): "a balanced argument that starts with `(` without ending "
    "with `)` (or the reverse) keeps a bracket after either cut, so no name list is read either way",
    ("kvlint/analysis/census/constructor_shapes.py", 139, "if-branch never taken"): "a cache: what is read again "
    "of the same function's body is equal (the reads depend on nothing but the body)",
    ("kvlint/analysis/census/spec_parameters.py", 140, "False -> True"): "the `**` entry of a constructor's "
    'parameters is only ever tested for membership (`"**" in parameters`); no name a value reads is `**`, so its '
    "None-by-default flag is never read",
    (
        "kvlint/analysis/flow/provenance.py",
        353,
        "if-branch never taken",
    ): "the walrus holders only let the reaching walk skip expressions with no `:=` under them; with none (None) it searches every expression and finds the same",
    (
        "kvlint/analysis/flow/provenance.py",
        353,
        "if-condition negated",
    ): "the walrus holders only let the reaching walk skip expressions with no `:=` under them; with none (None) it searches every expression and finds the same",
    (
        "kvlint/analysis/flow/provenance.py",
        353,
        "is -> is not",
    ): "the walrus holders only let the reaching walk skip expressions with no `:=` under them; with none (None) it searches every expression and finds the same",
    (
        "kvlint/analysis/flow/provenance.py",
        356,
        "if-condition negated",
    ): "marking more nodes as holding a `:=` makes the reaching walk search more expressions, finding the same walruses",
    (
        "kvlint/analysis/flow/provenance.py",
        356,
        "is -> is not",
    ): "marking more nodes as holding a `:=` makes the reaching walk search more expressions, finding the same walruses",
    (
        "kvlint/analysis/flow/provenance.py",
        359,
        "and -> or",
    ): "past the first marked node the loop goes on to the root (and marks None): more nodes marked, the same walruses found",
    ("kvlint/analysis/flow/provenance.py", 194, "if-branch never taken"): "a fast exit: with no binding no result "
    "is collected, and the end answers UNKNOWN too",
    ("kvlint/analysis/flow/provenance.py", 202, "if-branch never taken"): "a binding without a value is UNKNOWN on "
    "every branch after it: `classify(None)` and `element_of(None, …)` match no node kind and answer UNKNOWN",
    ("kvlint/analysis/flow/provenance.py", 232, "if-branch never taken"): "a parameter's binding is only made with its "
    "function (`_function_bindings`), so it is never None here",
    ("kvlint/analysis/flow/provenance.py", 242, "if-branch never taken"): "a call that passes nothing for the "
    "parameter: `classify(None)` is UNKNOWN, which the kind test after it skips as well",
    ("kvlint/analysis/flow/provenance.py", 286, "if-branch never taken"): "a cache: the bindings collected again are "
    "equal, and only their nodes, the same ones, are keyed on (`_classify_param`)",
    ("kvlint/analysis/flow/provenance.py", 292, "False -> True"): "a parameter's binding is read as a parameter "
    "before `is_loop` is looked at, by every reader (provenance, kvlint.analysis.dcp_factor and scaling)",
    ("kvlint/analysis/census/constant_arguments.py", 133, "if-branch never taken"): "a fast path: a name, read "
    "by `_bound_names` below, binds itself when stored and nothing when read, as here",
    ("kvlint/analysis/census/instantiation.py", 154, "if-branch never taken"): "the sieve then never skips a "
    "module's attribute (`linear.X`): the walk follows it and, when the sieve would have said so, builds nothing",
    ("kvlint/analysis/census/instantiation.py", 157, "False -> True"): "only a call's callee that is an attribute "
    "of no name gets here (`a.b.c(…)`), and the walk builds nothing of it either: `_reference` of such a callee is "
    "nothing",
    ("kvlint/engine/grouping.py", 166, ">= -> >"): "ranges that touch (one ending where the next starts) are then "
    "read as apart: a finding at that point is held by the later one, found first by bisection, and one before it "
    "only by the earlier, found by its outer spans",
    ("kvlint/engine/grouping.py", 169, "1 -> 2"): "the `-1` of a span with no outer span: any negative index ends "
    "the climb to a finding's function",
    ("kvlint/engine/grouping.py", 175, "<= -> <"): "spans sharing a start or an end with the one holding them are "
    "then no tree, and every span is asked, as before: the same span for each finding",
}
