"""Runner code a worker runs only when a setting selects it (kvlint.analysis.runner_reach): a finding there
cannot prove its witness runs it, so it says so and is a warning."""

from __future__ import annotations

from kvlint.analysis.runner_reach import read_runner_selection, selected_by

WORKER = b"""
class Worker:
    def init_device(self):
        if self.use_v2_model_runner:
            from vllm.v1.worker.gpu.model_runner import GPUModelRunner as GPUModelRunnerV2

            self.model_runner = GPUModelRunnerV2(self.vllm_config)
        else:
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            self.model_runner = GPUModelRunner(self.vllm_config)
        if not self.use_cpu_runner:
            from vllm.v1.worker.cpu.runner import CPURunner
"""


def test_a_runner_a_worker_imports_only_under_a_setting_is_selected_by_it():
    selection = read_runner_selection({"vllm/v1/worker/gpu_worker.py": WORKER})
    # The V2 runner's package; not the default runner (its own folder), not an `if not` branch's import.
    assert selection == (("vllm/v1/worker/gpu", "self.use_v2_model_runner", "gpu_worker.py:4"),)
    link = selected_by(selection, "/tree/vllm/v1/worker/gpu/model_runner.py")
    assert (
        link
        == "that the worker runs this code for it is unproven: it is selected by `self.use_v2_model_runner` (gpu_worker.py:4)"
    )
    assert selected_by(selection, "vllm/v1/worker/gpu_model_runner.py") is None
    assert selected_by(selection, "vllm/v1/worker/gpu_worker.py") is None


def test_only_worker_modules_select_runners():
    assert read_runner_selection({"vllm/v1/worker/gpu/model_runner.py": WORKER}) == ()
    assert read_runner_selection({"vllm/v1/engine/core.py": WORKER}) == ()
