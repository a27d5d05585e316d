"""Environment fingerprints: what counts as a difference, and what is only unknown."""

from kit.envdiff import Difference, environment_diff, environment_versions, unknown_fields


def env(runtime="host", pinned=False, **container):
    base = {"python": "3.11.7", "torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9"}
    return {
        "name": "cuda13",
        "runtime": runtime,
        "pinned": pinned,
        "container": {**base, **container},
    }


def test_same_environment_has_no_difference():
    assert environment_diff(env(), env()) == []


def test_each_changed_version_is_one_difference_in_a_fixed_order():
    diffs = environment_diff(env(), env(torch="2.14.1+cu130", nccl="2.27.3"))
    assert diffs == [
        Difference("torch", "2.11.0+cu130", "2.14.1+cu130"),
        Difference("nccl", "2.28.9", "2.27.3"),
    ]
    assert diffs[0].line("bundle", "here") == "torch: 2.11.0+cu130 (bundle) -> 2.14.1+cu130 (here)"


def test_unknown_on_one_side_is_not_a_difference_but_is_listed():
    cpu = env(nccl=None, cudnn=None)
    gpu = env(cudnn="91002")
    assert environment_diff(cpu, gpu) == []
    assert unknown_fields(cpu, gpu) == ["cudnn", "nccl"]


def test_driver_comes_from_the_hardware_record_when_the_container_has_none():
    hw_a = {"driver": {"version": "580.95.05"}}
    hw_b = {"driver": {"version": "570.10"}}
    assert environment_versions(env(), hw_a)["driver"] == "580.95.05"
    assert environment_diff(env(), env(), hw_a, hw_b) == [
        Difference("driver", "580.95.05", "570.10")
    ]
    # a driver recorded inside the container wins over the inventory
    assert environment_diff(env(driver="1"), env(driver="1"), hw_a, hw_b) == []


def test_image_hashes_are_compared_only_between_pinned_environments():
    a = {**env("docker", True), "image_id": "sha256:aa", "lock_sha256": "11"}
    b = {**env("docker", True), "image_id": "sha256:bb", "lock_sha256": "11"}
    assert environment_diff(a, b) == [Difference("image_id", "sha256:aa", "sha256:bb")]
    host = env()
    fields = [d.field for d in environment_diff(a, host)]
    assert fields == ["runtime", "pinned"]  # no image id on the host side: not a hash mismatch


def test_numbers_and_strings_compare_as_text():
    assert environment_diff(env(cudnn=91002), env(cudnn="91002")) == []
