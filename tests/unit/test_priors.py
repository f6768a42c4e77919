"""The literature priors: every row cites a key of seed 000's evidence table."""

from __future__ import annotations

import csv
import hashlib
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pareto_atlas.spec.priors import acceptance_from_tokens_per_step, evidence_keys, get_prior, load_priors
from pareto_atlas.simulate.cost_model import tokens_per_verify

# sha256 of seed 000's review table (data/review/evidence_table.tsv of the seed's shared data), checked
# equal to the shipped copy on 2026-12-01: the shipped file is that table, byte for byte.
REVIEW_TABLE_SHA256 = "f9fa6e177a5ae7f36f3f94febde31c9726eab2c35550a82a9ac68175f4aa2134"


def test_every_prior_cites_a_key_of_the_shipped_evidence_table():
    priors = load_priors()
    assert 15 <= len(priors) <= 40
    missing = {p.key: p.source for p in priors.values() if p.source not in evidence_keys()}
    assert not missing


def test_shipped_table_is_the_review_table():
    shipped = resources.files("pareto_atlas.spec").joinpath("evidence_table.tsv")
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == REVIEW_TABLE_SHA256
    keys = {row["key"] for row in csv.DictReader(shipped.read_text().splitlines(), delimiter="\t")}
    assert keys == set(evidence_keys()) and len(keys) == 124
    assert all(p.source in keys for p in load_priors().values())


def test_unknown_prior_names_the_known_ones():
    with pytest.raises(ValueError, match="eagle_tokens_per_step"):
        get_prior("nope")


@given(st.floats(0.0, 0.95), st.integers(1, 8))
def test_acceptance_inverts_tokens_per_verify(a, k):
    assert acceptance_from_tokens_per_step(tokens_per_verify(a, k), k) == pytest.approx(a, abs=1e-4)
