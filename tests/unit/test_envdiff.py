"""Environment fingerprints: what counts as a difference, and what is only unknown."""

from kit.env.diff import Difference, environment_diff, environment_versions, unknown_fields
from kit.model import Environment, Hardware


def env(runtime="host", pinned=False, **fields):
    """An environment.json as the typed model its readers take; `fields` go into `container`,
    or, named like an Environment field (a pinned image's hashes), onto the record itself."""
    base = {"python": "3.11.7", "torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9"}
    own = {k: v for k, v in fields.items() if k in Environment.model_fields}
    container = {k: v for k, v in fields.items() if k not in own}
    return Environment.model_validate(
        {"name": "cuda13", "runtime": runtime, "pinned": pinned, **own,
         "container": {**base, **container}}
    )  # fmt: skip


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
    hw_a = Hardware.model_validate({"driver": {"version": "580.95.05"}})
    hw_b = Hardware.model_validate({"driver": {"version": "570.10"}})
    assert environment_versions(env(), hw_a)["driver"] == "580.95.05"
    assert environment_diff(env(), env(), hw_a, hw_b) == [
        Difference("driver", "580.95.05", "570.10")
    ]
    # a driver recorded inside the container wins over the inventory
    assert environment_diff(env(driver="1"), env(driver="1"), hw_a, hw_b) == []


def test_image_hashes_are_compared_only_between_pinned_environments():
    digest = "sha256:" + "d" * 64
    a = env("docker", True, image_id="sha256:aa", lock_sha256="1" * 64, base_image_digest=digest)
    b = env("docker", True, image_id="sha256:bb", lock_sha256="2" * 64, base_image_digest=digest)
    assert environment_diff(a, b) == [Difference("lock_sha256", "1" * 64, "2" * 64)]
    host = env()
    fields = [d.field for d in environment_diff(a, host)]
    # no image id on the host side: not a hash mismatch; the engine differs (docker, none)
    assert fields == ["runtime", "engine", "pinned"]
    # an image FROM a local base (no digest) is not pinned, whatever an older kit recorded
    local = env("docker", True, image_id="sha256:cc", lock_sha256="1" * 64, base_image="mine:x")
    assert [d.field for d in environment_diff(a, local)] == ["pinned"]
    assert local.pin() == (False, "local base image, not by digest")
    # the contents compared (kit.env.content): how each image was made is only a note
    assert environment_diff(a, b, by_content=True) == []
    assert environment_diff(a, local, by_content=True) == []


def test_a_docker_bundle_rerun_under_podman_names_the_engine():
    """An old (schema 1) Docker bundle against a schema-2 Podman environment: the engine and the
    runtime differ, the placement (this machine) does not."""
    old = env("docker", True, lock_sha256="1" * 64)
    new = env("podman", True, lock_sha256="1" * 64, placement="local", engine="podman")
    assert [(d.field, d.old, d.new) for d in environment_diff(old, new)] == [
        ("runtime", "docker", "podman"),
        ("engine", "docker", "podman"),
    ]


def test_old_files_read_their_placement_and_engine():
    """Schema-1 environment.json: the two axes from the runtime, the Slurm launcher, the nodes."""
    cases = [
        ({"runtime": "host"}, ("local", "none")),
        ({"runtime": "docker"}, ("local", "docker")),
        ({"runtime": "docker", "nodes": [{"node": 0}]}, ("multinode", "docker")),
        ({"runtime": "slurm", "launcher": "pyxis"}, ("slurm", "pyxis")),
        ({"runtime": "slurm", "launcher": "apptainer"}, ("slurm", "apptainer")),
        ({"runtime": "slurm", "launcher": "host"}, ("slurm", "none")),
        ({"runtime": "x", "placement": "k8s", "engine": "docker", "schema": 2}, ("k8s", "docker")),
    ]
    for fields, axes in cases:
        assert Environment.model_validate({"pinned": False, **fields}).axes() == axes, fields


def test_numbers_and_strings_compare_as_text():
    assert environment_diff(env(cudnn=91002), env(cudnn="91002")) == []


def test_a_rebuilt_image_of_the_same_content_differs_only_informationally():
    """The same content tag rebuilt gets a new image id: a note, never a difference that matters."""
    same = {"content_hash": "c" * 64, "base_image_digest": "sha256:dd", "lock_sha256": "1" * 64}
    a = env("docker", True, **same, image_id="sha256:aa", base_image_id="sha256:b1")
    b = env("docker", True, **same, image_id="sha256:bb", base_image_id="sha256:b2")
    assert environment_diff(a, b) == []
    notes = environment_diff(a, b, informational=True)
    assert [(d.field, d.matters) for d in notes] == [("image_id", False), ("base_image_id", False)]
    assert notes[0].to_dict() == {"field": "image_id", "old": "sha256:aa", "new": "sha256:bb"}
    # what the image holds does matter: another content hash, base digest or version inside
    other = env("docker", True, **{**same, "content_hash": "e" * 64,
                "base_image_digest": "sha256:ee"}, nccl="2.27.3", image_id="sha256:bb")  # fmt: skip
    fields = [(d.field, d.matters) for d in environment_diff(a, other)]
    assert fields == [("nccl", True), ("content_hash", True), ("base_image_digest", True)]
