"""The shared multi-kernel machinery: dictionary strings, per-kernel seeds, draws, features."""

import numpy as np
import pytest

import okl_core
from okl_core.features import FourierFeatures
from okl_core.learners.multikernel import (
    OKS_DICTIONARY,
    OMKL_DICTIONARY,
    KernelFeatureBank,
    example_uniforms,
    kernel_dictionary,
    kernel_seed,
    kernel_seeds,
    parse_kernel_dictionary,
)
from okl_core.learners.omkl import RakerConfig
from okl_core.random import block_bit_generator, uniform_open


def test_default_dictionaries_are_the_papers():
    omkl = parse_kernel_dictionary(OMKL_DICTIONARY)
    assert [s for _, s in omkl] == [2.0**k for k in range(-8, 9)] and {k for k, _ in omkl} == {"gaussian"}
    oks = parse_kernel_dictionary(OKS_DICTIONARY)
    assert oks == tuple(("gaussian", 2.0**k) for k in range(-2, 4))
    assert kernel_dictionary("laplacian", 0, 1) == "laplacian:2^0,laplacian:2^1"


def test_dictionary_accepts_floats_powers_of_two_and_spaces():
    assert parse_kernel_dictionary(" gaussian:0.25 , laplacian:2^-3,cauchy:1e1") == (
        ("gaussian", 0.25),
        ("laplacian", 0.125),
        ("cauchy", 10.0),
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "non-empty"),
        (3, "non-empty"),
        ("gaussian:1,gaussian", "entry 2"),
        ("gaussian:1,rbf:2", "kernel 'rbf'"),
        ("gaussian:0", "entry 1"),
        ("gaussian:-1", "entry 1"),
        ("gaussian:nan", "entry 1"),
        ("gaussian:2^x", "entry 1"),
        ("gaussian:0.5,gaussian:2^-1", "twice"),
    ],
)
def test_bad_dictionaries_name_the_entry(text, message):
    with pytest.raises(ValueError, match=message):
        parse_kernel_dictionary(text)
    with pytest.raises(ValueError):
        okl_core.make_learner("raker", n_inputs=2, kernels=text)


def test_kernel_seeds_are_pinned_distinct_and_outside_the_example_stream():
    # Pinned: a change here changes every multi-kernel model's features.
    assert kernel_seed(0, 0) == 10790346032027575784
    assert kernel_seed(7, 3) == 16916043525901472901
    # Word 0 of generator (seed, 2^63 + j); examples use (seed, t) with t < 2^63.
    assert kernel_seed(5, 2) == int(block_bit_generator(5, 2**63 + 2).random_raw(1)[0])
    seeds = kernel_seeds(11, 17)
    assert len(set(seeds) | {11}) == 18
    with pytest.raises(ValueError, match="2\\*\\*63"):
        example_uniforms(0, 2**63, 1)


def test_example_uniforms_are_the_words_of_generator_seed_t():
    u = example_uniforms(3, 41, 5)
    np.testing.assert_array_equal(u, uniform_open(block_bit_generator(3, 41).random_raw(5)))
    assert np.all((u > 0) & (u < 1))
    assert not np.array_equal(u, example_uniforms(3, 42, 5))


def test_feature_bank_uses_one_seeded_fourier_map_per_kernel():
    config = RakerConfig(n_inputs=5, kernels="gaussian:0.5,laplacian:2,cauchy:1", n_components=24, seed=9, block_size=16)
    bank = KernelFeatureBank(config)
    X = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    for j, (kernel, sigma) in enumerate(config.dictionary):
        spec = bank.specs[j]
        assert (spec.kernel, spec.sigma, spec.seed, spec.n_components, spec.scaled) == (kernel, sigma, kernel_seed(9, j), 24, True)
        reference = FourierFeatures(spec).transform(X).astype(np.float64)
        rows = np.stack([bank.rows(bank.stack()[j : j + 1], x)[0] for x in X])
        np.testing.assert_allclose(rows, reference, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bank.transform(j, X), reference)
    # Independent kernels: the Gaussian's frequencies are not a rescaled copy of another's.
    assert not np.allclose(bank.stack()[0] * 0.5, bank.stack()[1])


def test_kernel_reports_name_each_bandwidth():
    learner = okl_core.make_learner("raker", n_inputs=2, kernels="gaussian:2^-1,gaussian:4", n_components=4)
    state = learner.init()
    assert learner.kernel_labels == ["gaussian:0.5", "gaussian:4.0"]
    assert learner.kernel_weights(state) == {"gaussian:0.5": 0.5, "gaussian:4.0": 0.5}
    assert learner.kernel_usage(state) == {"gaussian:0.5": 0, "gaussian:4.0": 0}
    assert learner.best_kernel(state) == "gaussian:0.5"
