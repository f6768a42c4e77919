"""Random draws inside the compiled simulation: uniforms and normals from numba's own stream, step
jitter, and the tokens a speculative decode step accepts."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core.extending import intrinsic
from numba.core.typing import signature

from pareto_atlas.simulate.kernels._cache import CACHE

try:  # numba internals (see _uniform below); a numba without them runs the plain calls instead
    from numba.cpython.randomimpl import GuassArgs, _gauss_impl, get_next_double, get_state_ptr
except ImportError:  # pragma: no cover - depends on the installed numba
    get_next_double = None


# np.random.random() and np.random.normal(), inlined: numba compiles those calls out of line, with
# a thread-local state lookup on every draw, and a speculative decode step makes one to k draws
# per sequence. Built from the helpers numba's own np.random is built from (same state, same
# Mersenne Twister step, same polar method with its cached second normal): the same stream.
# These helpers are not numba's public API: if a release drops them, the import above fails and the
# plain calls below give the same stream, about a third slower on speculative cases.
if get_next_double is not None:

    @intrinsic
    def _uniform(typingcontext):
        def codegen(context, builder, sig, args):
            return get_next_double(context, builder, get_state_ptr(context, builder, "np"))

        return signature(types.float64), codegen

    @intrinsic
    def _normal(typingcontext, loc, scale):
        def as_is(builder, value):
            return value

        sig = signature(types.float64, types.float64, types.float64)
        return sig, _gauss_impl(GuassArgs("np", _uniform), as_is, as_is)
else:  # pragma: no cover

    @njit(cache=CACHE)
    def _uniform() -> float:
        return np.random.random()

    @njit(cache=CACHE)
    def _normal(loc: float, scale: float) -> float:
        return np.random.normal(loc, scale)


@njit(cache=CACHE)
def _noise(cv: float, m: float) -> float:
    # Mean-one lognormal; averaged over m steps its spread shrinks as 1/sqrt(m).
    if cv <= 0.0:
        return 1.0
    s = cv / np.sqrt(m)
    return np.exp(s * _normal(0.0, 1.0) - 0.5 * s * s)


@njit(cache=CACHE, inline="always")
def _accepted(n: int, k: int, a: float, p_draft: float, out: np.ndarray) -> None:
    # Tokens each of n decoding sequences emits in one step, in turn: 1 where it does not draft
    # (probability 1 - p_draft, one draw decides, none when p_draft >= 1), else the accepted
    # prefix of k drafts plus the bonus token. Branch-free per draw, one stream of uniforms for
    # the whole batch: a draw's outcome is unpredictable, and a mispredicted branch per sequence
    # costs more than its draws.
    always = p_draft >= 1.0
    drafting = always
    hits = 0
    j = 0
    while j < n:
        hit = _uniform() < (a if drafting else p_draft)
        hits += hit & drafting
        done = (not hit) | (drafting & (hits == k))
        out[j] = 1 + hits
        j += done
        hits = 0 if done else hits
        drafting = always if done else True


@njit(cache=CACHE, inline="always")
def _tokens_per_step(spec_on, k, acc, p_draft):
    # Mean and variance of tokens per step: 1 + accepted prefix of k drafts on the steps that
    # draft (probability p_draft), 1 on the others.
    e_tok = 1.0
    v_tok = 0.0
    if spec_on:
        e2 = 1.0 - p_draft
        e_tok = 1.0 - p_draft
        for j in range(1, k + 2):
            pj = acc ** (j - 1) * (1.0 - acc) if j <= k else acc**k
            e_tok += p_draft * j * pj
            e2 += p_draft * j * j * pj
        v_tok = e2 - e_tok * e_tok
    return e_tok, v_tok
