"""shapejit.greedy_generate over exported LM pairs (tests/data/generate, made
by tools/export_generate.py): the tokens torch's generate() picked, from a
prefill and a step session, then again from the store alone; and for three
prompts generated together."""
import json

import numpy as np
import pytest

import shapejit
from conftest import REPO

GENERATE = REPO / "tests" / "data" / "generate"


def _pairs():
    return sorted(p.name for p in GENERATE.glob("*_lm_torchscript"))


def _sessions(folder, store, batch=1):
    mf = json.loads((folder / "manifest.json").read_text())
    sess = [shapejit.InferenceSession(str(folder / mf[k]["model"]), store=store,
                                      dynamic=mf[k]["dynamic"], dims={**mf[k]["dims"], "batch": batch})
            for k in ("prefill", "step")]
    return mf, sess


@pytest.mark.parametrize("pair", _pairs())
def test_greedy_tokens_match_torch(pair, tmp_path):
    folder = GENERATE / pair
    store = str(tmp_path / "store.db")
    for warm in (False, True):
        mf, (prefill, step) = _sessions(folder, store)
        r = shapejit.greedy_generate(prefill, step, np.array([mf["prompt"]]), mf["new_tokens"])
        assert r.tokens.tolist() == [mf["tokens"]], (warm, r.tokens.tolist())
        assert len(r.step_seconds) == mf["new_tokens"] - 1
        assert r.step_pasts == list(range(len(mf["prompt"]), len(mf["prompt"]) + len(r.step_pasts)))
        stats = step.engine.stats()
        if warm:  # a fresh session finds every bucket in the store
            assert stats["compiles"] == 0 and stats["store_hits"] > 0, stats
        else:
            assert stats["compiles"] > 0, stats


@pytest.mark.parametrize("pair", _pairs())
def test_batch_of_prompts_matches_torch(pair, tmp_path):
    """Three prompts at once: the exporters' masks flatten [batch, seq], a
    merge of the bucketed dim with the batch in front of it (built compact)."""
    folder = GENERATE / pair
    mf = json.loads((folder / "manifest.json").read_text())
    prompts = np.array(mf["batch_prompt"])
    _, (prefill, step) = _sessions(folder, str(tmp_path / "store.db"), batch=len(prompts))
    r = shapejit.greedy_generate(prefill, step, prompts, mf["new_tokens"])
    assert r.tokens.tolist() == mf["batch_tokens"]


def test_bad_pairs_are_named(tmp_path):
    folder = GENERATE / _pairs()[0]
    mf, (prefill, step) = _sessions(folder, str(tmp_path / "store.db"))
    with pytest.raises(ValueError, match="prompt must be"):
        shapejit.greedy_generate(prefill, step, np.array(mf["prompt"]), 3)
    with pytest.raises(ValueError, match="new_tokens must be"):
        shapejit.greedy_generate(prefill, step, np.array([mf["prompt"]]), 0)
    # the prefill as the step: its inputs hold no cache
    with pytest.raises(ValueError, match="no cache input"):
        shapejit.greedy_generate(prefill, prefill, np.array([mf["prompt"]]), 3)
