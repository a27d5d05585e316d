"""Issue 49 against a real Docker daemon: what is inside the image, what the runs loaded, and
exactly what differs, on the two paths a rerun on another machine takes.

One test, because every step needs the one before (an image build, a bundle, a planted base):
- the cpu image's inventory is made once and then read from the cache (no container the second time);
- a bundle of ngc-pytorch's environment (packages: image) FROM the local cpu image says "local
  base image, not by digest" (FROM the cpu image, a rerun on a planted base builds one layer);
- its rerun FROM a base that differs by a planted Debian package and a planted CUDA library
  names both, says the runs loaded neither and that the environment matches, and so does
  `kit compare` (page 1's sentence, its section, compare.json), with no DIFFERENT ENVIRONMENTS;
- `kit export` of the image and a rerun with --image-archive run the very same image: "same image";
  so does a recipe run on that archive with --env (one export: a gigabyte of CI's disk each).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid

import pytest

from kit.runtime.containers.client import LABEL_OWNER, leftovers
from kit.runtime.images import environments, software
from kit.runtime.images import image as images
from tests.conftest import allreduce_recipe, docker_or_skip, room_to_export, run_kit

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cpu_image]

BASE = os.environ.get("KIT_TEST_BASE_IMAGE", "kit-test-base:bookworm")
OWNER = f"kit-test-{os.getpid()}-{os.urandom(4).hex()}"
PLANTED_LIB = "/usr/local/cuda-13.0/lib64/libcudart.so.13"
ENV = "ngc-pytorch"  # packages: image; here FROM the cpu image, so a rebuild is one layer


def plant(base: str) -> str:
    """A Dockerfile FROM `base` with a planted Debian package and a planted CUDA library."""
    return f"""FROM {base}
RUN printf '\\nPackage: kit-planted\\nStatus: install ok installed\\nArchitecture: all\\nVersion: 1.0\\nDescription: planted by a test\\n' >> /var/lib/dpkg/status \\
 && mkdir -p /usr/lib/kit-planted {os.path.dirname(PLANTED_LIB)} \\
 && echo planted > /usr/lib/kit-planted/libkitplanted.so.1 \\
 && echo /usr/lib/kit-planted/libkitplanted.so.1 > /var/lib/dpkg/info/kit-planted.list \\
 && echo 'c0ffee  usr/lib/kit-planted/libkitplanted.so.1' > /var/lib/dpkg/info/kit-planted.md5sums \\
 && echo 'not a library' > {PLANTED_LIB}
"""


SIZES = "min_bytes: 8, max_bytes: 1024, factor: 8, iters: 2, warmup_iters: 1, trials: 1"
RECIPE = allreduce_recipe("env-identity", SIZES, timeout_s=300, environment="cpu")


@pytest.fixture(scope="module")
def client():
    c = docker_or_skip(300)
    try:
        c.images.get(BASE)
    except Exception:
        pytest.skip(f"needs the base image {BASE}: tests/docker/make_base_image.sh")
    return c


def kit(*args: str, timeout: float = 600):
    return run_kit(*args, env={**os.environ, "KIT_OWNER": OWNER}, timeout=timeout)


def remove_with_descendants(client, ref: str) -> None:
    """Remove the image `ref` and every image built FROM it: the rerun's image and its install
    stage, which Docker's classic builder keeps untagged as the next build's cache."""
    try:
        root = client.images.get(ref).id
    except Exception:
        return
    children: dict[str, list[str]] = {}
    for i in client.api.images(all=True):
        children.setdefault(i.get("ParentId") or "", []).append(i["Id"])
    order: list[str] = []

    def below(image_id: str) -> None:
        for child in children.get(image_id, []):
            below(child)
        order.append(image_id)

    below(root)
    for image_id in order:  # leaves first
        with contextlib.suppress(Exception):
            client.images.remove(image_id, force=True)


def flat(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def test_inventory_rerun_on_a_planted_base_and_the_same_image(client, tmp_path, monkeypatch):
    cpu = images.build(environments.load("cpu"), BASE, client=client, echo=lambda _: None)

    # (a) the inventory: made once per image id, then read back from the cache
    with monkeypatch.context() as m:
        m.setenv("KIT_CACHE", str(tmp_path / "cache"))
        made, cached = software.inventory(cpu.tag, cpu.image_id, client)
        again, cached_again = software.inventory(cpu.tag, cpu.image_id, client)
    assert not cached and cached_again and again == made
    torch = next(d for d in made["distributions"] if d["name"] == "torch")
    assert torch["version"] == "2.13.0+cpu" and "torch" in torch["top"] and torch["sha256"]
    libc6 = next(p for p in made["debian"] if p["name"] == "libc6")
    assert "/usr/lib/x86_64-linux-gnu/libc.so.6" in libc6["libs"]
    assert made["dpkg_status"] is True  # Debian's database was there: "N Debian packages"
    assert made["variables"]["PYTHONPATH"] == "/opt/kit"
    assert len(json.dumps(made)) < 400_000

    # a bundle of ngc-pytorch's environment FROM the local cpu image: not pinned, and said so (a
    # rerun FROM a planted copy of that base then builds one layer, not a torch install: minutes
    # and 2.5 GB of CI's disk)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    first_bundle = tmp_path / "a"
    args = ["--device", "cpu", "--smoke", "--runtime", "docker", "--env", ENV, "--base-image"]
    proc = kit("reproduce", str(recipe), *args, cpu.tag, "--out", str(first_bundle))
    assert proc.returncode == 0, proc.stderr[-3000:]
    image = images.build(environments.load(ENV), cpu.tag, client=client, echo=lambda _: None)
    assert image.cached  # the kit's run built it
    assert "local base image, not by digest" in proc.stderr
    env = json.loads((first_bundle / "environment.json").read_text())
    assert env["pinned"] is False and env["pinning"] == "local base image, not by digest"
    # packages: image (no lock, no wheels): the versions are read inside, the base by its layers
    assert env["name"] == ENV and env["lock_sha256"] is None and env["network"] == "none"
    assert env["base_image"] == cpu.tag and re.fullmatch(r"[0-9a-f]{64}", env["base_image_content"])
    assert env["container"]["torch"] == "2.13.0+cpu"
    assert json.loads((first_bundle / "results.json").read_text())["pinned"] is False
    page = flat((first_bundle / "report.html").read_text())
    assert "image not pinned: local base image, not by digest" in page
    # the environment's name beside those words, without saying them twice
    assert f"not by digest, environment {ENV} FROM {cpu.tag})" in page
    assert f"FROM {cpu.tag} (local base image" not in page
    stored = json.loads((first_bundle / "software.json").read_text())
    assert stored["image_id"] == image.image_id and stored["distributions"] == made["distributions"]
    (result,) = [json.loads(p.read_text()) for p in first_bundle.glob("runs/*/result.json")]
    libs = result["loaded"]["libraries"]
    assert any(p.endswith("/torch/lib/libtorch_cpu.so") for p in libs)
    assert "/usr/lib/x86_64-linux-gnu/libc.so.6" in libs and "torch" in result["loaded"]["modules"]
    assert "loaded" not in json.loads((first_bundle / "results.json").read_text())["runs"][0]
    assert "MANIFEST.sha256" in os.listdir(first_bundle)
    assert "software.json" in (first_bundle / "MANIFEST.sha256").read_text()
    # the runs wrote nothing into their run folders but what the manifest lists
    verify = kit("verify", str(first_bundle))
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # (b) rerun FROM a base that differs by a planted package and a planted CUDA library
    planted = f"kit-test-planted-{uuid.uuid4().hex[:10]}:1"
    build = {"tag": planted, "rm": True, "labels": {LABEL_OWNER: OWNER}}
    client.images.build(fileobj=io.BytesIO(plant(cpu.tag).encode()), **build)
    rerun = tmp_path / "b"
    try:
        proc = kit("reproduce", str(first_bundle), "--base-image", planted, "--out", str(rerun))
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:  # this test's images: the planted base and the image built FROM it
        remove_with_descendants(client, planted)
    said = " ".join(proc.stderr.split())
    assert "present, not loaded: debian kit-planted:all 1.0: only here (not loaded)" in said
    assert f"present, not loaded: library {PLANTED_LIB} sha256" in said
    sentence = (
        "The environment matches: nothing the runs loaded differs (2 differences present but "
        "not loaded)."
    )
    assert f"environment matches the bundle's (as the runs recorded it): {sentence}" in said
    # before the runs too, the kit's own files in the image included (worker_module_digest)
    assert "environment matches the bundle's (before running)" in said
    assert "ENVIRONMENT DIFFERS" not in said and "differ in software" not in said
    results = json.loads((rerun / "results.json").read_text())
    check = results["environment_check"]
    assert check["matches"] and check["loaded"] == [] and results["environment_diff"] == []
    unloaded = [(c["kind"], c["name"]) for c in check["unloaded"]]
    assert unloaded == [("debian", "kit-planted:all"), ("library", PLANTED_LIB)]
    assert "base_image_content" in {n["field"] for n in results["environment_notes"]}
    assert sentence in flat((rerun / "report.html").read_text())

    compared = tmp_path / "compare-b"
    proc = kit("compare", str(first_bundle), str(rerun), "--out", str(compared))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((compared / "compare.json").read_text())
    (entry,) = data["environment_checks"]
    assert entry["matches"] and entry["sentence"] == sentence
    assert [c["name"] for c in entry["unloaded"]] == ["kit-planted:all", PLANTED_LIB]
    page = flat((compared / "compare.html").read_text())
    assert "DIFFERENT ENVIRONMENTS" not in page and sentence in page
    assert "Environment differences" in page and "kit-planted:all" in page

    # (c) the identical image: kit export, then a rerun with --image-archive
    archive = tmp_path / "kit-ngc-pytorch.tar"
    room_to_export(client, image.tag, tmp_path)
    proc = kit("export", image.tag, "-o", str(archive))
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        same = tmp_path / "c"
        args = ["--image-archive", str(archive), "--out", str(same)]
        proc = kit("reproduce", str(first_bundle), *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        # a recipe (not a bundle) on the archive's image: --env names the environment
        from_recipe = tmp_path / "d"
        cmd = ["--device", "cpu", "--smoke", "--runtime", "docker", "--env", ENV]
        fresh = kit("reproduce", str(recipe), *cmd, "--image-archive", str(archive),
                    "--out", str(from_recipe))  # fmt: skip
        assert fresh.returncode == 0, fresh.stderr[-3000:]
    finally:
        archive.unlink()  # about a gigabyte
    env = json.loads((from_recipe / "environment.json").read_text())
    assert env["loaded_from"] == str(archive)
    assert (env["image_id"], env["image_tag"]) == (image.image_id, image.tag)
    assert (env["lock_sha256"], env["dockerfile_sha256"]) == (
        image.lock_sha256,
        image.dockerfile_sha256,
    )
    runs = json.loads((from_recipe / "results.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok"]
    said = " ".join(proc.stderr.split())
    same_image = f"Same image ({image.image_id[:19]}): the environment matches."
    assert same_image in said and "present, not loaded" not in said
    assert f"loaded from {archive}" in said and "built image" not in said  # loaded, never built
    env = json.loads((same / "environment.json").read_text())
    assert env["image_id"] == image.image_id and env["pinned"] is True
    assert env["loaded_from"] == str(archive)
    assert json.loads((same / "results.json").read_text())["environment_diff"] == []
    assert env["pinning"] == f"the image of a kit export archive, by its image id {image.image_id}"
    assert json.loads((same / "results.json").read_text())["environment_check"]["same_image"]
    # every library the first bundle's run hashed is in the image's memo: none read again
    (rerun_result,) = [json.loads(p.read_text()) for p in same.glob("runs/*/result.json")]
    assert rerun_result["loaded"]["libraries"] == libs and rerun_result["loaded"]["read_bytes"] == 0
    print(
        f"loaded record: {result['loaded']['seconds']} s ({result['loaded']['read_bytes']} bytes "
        f"hashed), same image again {rerun_result['loaded']['seconds']} s (from the memo)"
    )
    compared = tmp_path / "compare-c"
    proc = kit("compare", str(first_bundle), str(same), "--out", str(compared))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (entry,) = json.loads((compared / "compare.json").read_text())["environment_checks"]
    assert entry["same_image"] and entry["sentence"] == same_image
    assert same_image in flat((compared / "compare.html").read_text())
    assert leftovers(client, OWNER) == []
    assert client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"}) == []
