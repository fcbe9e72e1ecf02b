"""Greedy decoding of a causal language model with a KV cache, over the two
ONNX models exporters write for one (Optimum's decoder_model.onnx and
decoder_with_past_model.onnx; tools/export_generate.py's prefill.onnx and
step.onnx):

    import shapejit
    prefill = shapejit.InferenceSession("prefill.onnx", dynamic="seq", store=db)
    step = shapejit.InferenceSession("step.onnx", dynamic="past",
                                     dims={"total": "past+1"}, store=db)
    result = shapejit.greedy_generate(prefill, step, prompt, new_tokens=32)
    result.tokens          # int64 [batch, 32]
    result.step_seconds    # one entry per step after the prefill

Any pair of sessions with onnxruntime's call shape works (shapejit's or
onnxruntime's own), so one loop times both. Needs numpy only.

The pair is found by names: the prefill takes `input_ids` (and
`attention_mask`, `position_ids` where it has them) and returns the logits
(an output named `logits`, else its first) and one cache per layer and
kind; the step takes the same plus each cache as an input whose name has
`past` where the output's has `present` (`past_key_0` / `present_key_0`,
`past_key_values.0.key` / `present.0.key`), and returns the grown caches.
"""
import time
from typing import List, NamedTuple

import numpy as np


class GenerateResult(NamedTuple):
    tokens: np.ndarray        # int64 [batch, new_tokens]: the prefill's pick, then each step's
    prefill_seconds: float    # the prompt's run, argmax included
    step_seconds: List[float]  # each step's run after it (new_tokens - 1 entries)
    step_pasts: List[int]     # the cache length each step read


def _cache_key(name):
    """What a cache input and its output share once `past_key_values`,
    `past` or `present` is taken out of the name."""
    for word in ("past_key_values", "present", "past"):
        if word in name:
            return name.replace(word, "", 1)
    return None


def _names(session):
    return [i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()]


def _cache_pairs(step_inputs, outputs, what):
    """{step input: output of `what`} for every cache input of the step."""
    by_key = {}
    for o in outputs:
        k = _cache_key(o)
        if k is not None and "present" in o:
            by_key[k] = o
    pairs = {}
    for i in step_inputs:
        if "past" not in i:
            continue
        k = _cache_key(i)
        if k not in by_key:
            raise ValueError(f"greedy_generate: the step's cache input '{i}' has no output "
                             f"of the {what} to come from (its outputs: {', '.join(outputs)})")
        pairs[i] = by_key[k]
    if not pairs:
        raise ValueError("greedy_generate: the step model has no cache input (a name with "
                         f"'past'; its inputs: {', '.join(step_inputs)})")
    return pairs


def _logits_name(outputs):
    return "logits" if "logits" in outputs else outputs[0]


def _feed(inputs, ids, total, first_position):
    """The token inputs: ids [batch, seq], a mask of ones over the `total`
    tokens the step sees, positions from first_position."""
    batch, seq = ids.shape
    feed = {"input_ids": ids}
    if "attention_mask" in inputs:
        feed["attention_mask"] = np.ones((batch, total), np.int64)
    if "position_ids" in inputs:
        feed["position_ids"] = np.broadcast_to(
            np.arange(first_position, first_position + seq, dtype=np.int64), (batch, seq)).copy()
    return feed


def greedy_generate(prefill, step, prompt, new_tokens):
    """Runs the prompt through `prefill`, then `new_tokens - 1` steps of
    `step`, each fed the token the last picked (the argmax of its last
    position's logits) and the caches the last returned. prompt: int64
    [batch, seq]."""
    prompt = np.ascontiguousarray(prompt, dtype=np.int64)
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(f"greedy_generate: prompt must be [batch, seq] with seq >= 1, "
                         f"not {list(prompt.shape)}")
    if new_tokens < 1:
        raise ValueError(f"greedy_generate: new_tokens must be >= 1, not {new_tokens}")
    pre_in, pre_out = _names(prefill)
    step_in, step_out = _names(step)
    for model, names in (("prefill", pre_in), ("step", step_in)):
        if "input_ids" not in names:
            raise ValueError(f"greedy_generate: the {model} model has no input 'input_ids' "
                             f"(its inputs: {', '.join(names)})")
    from_prefill = _cache_pairs(step_in, pre_out, "prefill")
    from_step = _cache_pairs(step_in, step_out, "step")
    batch, seq = prompt.shape
    tokens = np.empty((batch, new_tokens), np.int64)

    t0 = time.perf_counter()
    out = dict(zip(pre_out, prefill.run(None, _feed(pre_in, prompt, seq, 0))))
    tokens[:, 0] = out[_logits_name(pre_out)][:, -1, :].argmax(-1)
    prefill_seconds = time.perf_counter() - t0
    caches = {i: out[o] for i, o in from_prefill.items()}

    step_seconds, step_pasts = [], []
    for t in range(1, new_tokens):
        past = seq + t - 1
        t0 = time.perf_counter()
        feed = _feed(step_in, tokens[:, t - 1:t], past + 1, past)
        feed.update(caches)
        out = dict(zip(step_out, step.run(None, feed)))
        tokens[:, t] = out[_logits_name(step_out)][:, -1, :].argmax(-1)
        step_seconds.append(time.perf_counter() - t0)
        step_pasts.append(past)
        caches = {i: out[o] for i, o in from_step.items()}
    return GenerateResult(tokens, prefill_seconds, step_seconds, step_pasts)
