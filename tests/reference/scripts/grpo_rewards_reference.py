"""TRL's built-in reward functions (trl.rewards, with math_verify under the accuracy rewards) on the
completions of cases.json, for the exact checks of trl/builtin_rewards.cpp and trl/math_answer.cpp.

usage: grpo_rewards_reference.py CASES OUT
CASES is {"rewards": [spec, ...], "cases": [{name, completion, completion_ids, solution,
[beyond]}]}; a spec names a built-in as trainer grpo's reward_funcs do: a name (the factories alone
as TRL's grpo script takes them: get_soft_overlong_punishment with max_completion_len=1280,
soft_punish_cache=256, the others with their defaults), a Python call of one (a plain function's
arguments bound with functools.partial), or {"name": ..., params}. Each reward is called once on
all the cases, as GRPOTrainer calls it: conversational completions ([{"role": "assistant",
"content": ...}]), completion_ids, and the "solution" column.
Writes OUT/rewards.json: the versions, and per spec its __name__ and values (None where TRL gives
None), with accuracy_reward's gold_parsed and answer_parsed columns (log_extra) for messages.
"""
import functools
import json
import logging
import os
import sys
from importlib.metadata import version

import trl.rewards
from trl.trainer.utils import get_callable_name

logging.disable(logging.WARNING)  # math_verify's "Timeout is disabled" and the like

MATH_VERIFY_VERSION = "0.9.0"
LATEX2SYMPY2_EXTENDED_VERSION = "1.11.0"

# TRL's grpo script's registry: the one factory it takes by name alone, with its values.
SCRIPT_REGISTRY = {"get_soft_overlong_punishment": {"max_completion_len": 1280, "soft_punish_cache": 256}}


def bound_call(name, args, kwargs):
    func = getattr(trl.rewards, name)
    if name.startswith("get_"):
        return func(*args, **kwargs)
    return functools.partial(func, *args, **kwargs) if args or kwargs else func


def reward_of(spec):
    if isinstance(spec, dict):
        kwargs = {k: v for k, v in spec.items() if k != "name"}
        if not kwargs and spec["name"] in SCRIPT_REGISTRY:
            kwargs = SCRIPT_REGISTRY[spec["name"]]
        return bound_call(spec["name"], (), kwargs)
    if "(" not in spec:
        return bound_call(spec, (), SCRIPT_REGISTRY.get(spec, {}))
    name = spec[:spec.index("(")].strip()
    args, kwargs = eval("capture" + spec[spec.index("("):], {"capture": lambda *a, **k: (a, k)})
    return bound_call(name, args, kwargs)


def main(cases_path, out):
    assert version("math-verify") == MATH_VERIFY_VERSION, version("math-verify")
    assert version("latex2sympy2_extended") == LATEX2SYMPY2_EXTENDED_VERSION
    with open(cases_path, encoding="utf-8") as f:
        spec = json.load(f)
    cases = spec["cases"]
    completions = [[{"role": "assistant", "content": c["completion"]}] for c in cases]
    prompts = [[{"role": "user", "content": c["name"]}] for c in cases]
    kwargs = {"completion_ids": [c["completion_ids"] for c in cases],
              "solution": [c["solution"] for c in cases]}
    results = []
    parsed = {}
    for reward_spec in spec["rewards"]:
        func = reward_of(reward_spec)
        extra = {}
        values = func(prompts=prompts, completions=completions,
                      log_extra=lambda column, values: extra.__setitem__(column, values), **kwargs)
        results.append({"spec": reward_spec, "name": get_callable_name(func), "values": values})
        if reward_spec == "accuracy_reward":
            parsed = {"gold_parsed": extra["gold_parsed"], "answer_parsed": extra["answer_parsed"]}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "rewards.json"), "w", encoding="utf-8") as f:
        json.dump({"versions": {name: version(name) for name in
                                ("trl", "math-verify", "latex2sympy2_extended", "sympy")},
                   "rewards": results, "accuracy_parsed": parsed}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
