"""TRL 1.16's SFTTrainer on a mixture of experts (hf_families.py's tiny Qwen3-MoE, its router loss
on: TRL's router_aux_loss_coef from the config, the weighted load-balancing loss added over the
accumulation steps and logged as aux_loss), for `trainer sft`'s parity check: sft_trl_reference.py's
run (its COMMON settings, prompt-completion data) with the model's folder in place of a fixture's,
each step's aux_loss recorded beside its other logs.

usage: sft_moe_reference.py MODEL_DIR FIXTURES OUT.json
"""
import os
import sys

import sft_trl_reference as reference


def main():
    model_dir, fixtures, out = sys.argv[1:4]
    # An absolute model path: sft_trl_reference joins it to FIXTURES, which leaves it as it is.
    reference.CASES["moe"] = (os.path.abspath(model_dir), "prompt_completion",
                              "prompt_completion_eval", {})
    reference.STEP_KEYS = reference.STEP_KEYS + ("aux_loss",)
    sys.argv = [sys.argv[0], "moe", fixtures, out]
    reference.main()


if __name__ == "__main__":
    main()
