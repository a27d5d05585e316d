"""Which image a Kubernetes run pulls when the user names none: the recipe's image as `kit build`
tags it, taken by the digest its push recorded (`RepoDigests`), never by a tag that can move.

A cluster pulls from a registry, so a local tag is not enough: when the image was never built
or never pushed, the one line names the tag to push and how to read its digest.
"""

from __future__ import annotations

from dataclasses import replace

from kit.io.errors import InputError
from kit.recipe import Recipe
from kit.run.k8s.manifests import K8sOptions
from kit.runtime.containers.client import docker_client
from kit.runtime.images import environments
from kit.runtime.images.image import image_tag


def recipe_tag(recipe: Recipe, device: str) -> str:
    """`kit-<env>:<hash12>`, the tag `kit build` gives this recipe's environment (pinned base)."""
    name, _ = environments.for_device(recipe.environment, device, None)
    return image_tag(environments.load(name))


def pushed_digest(tag: str) -> str | None:
    """REPO@sha256:... of `tag` in the local Docker daemon once pushed; None when there is no
    daemon, no such image, or it was never pushed."""
    try:
        image = docker_client().images.get(tag)
    except Exception:  # no daemon (KitError), no such image: the caller says what to do
        return None
    digests = image.attrs.get("RepoDigests") or []
    return str(digests[0]) if digests else None


def with_image(recipe: Recipe, opts: K8sOptions) -> K8sOptions:
    """`opts` with an image: the user's --image, else the recipe's pushed image by digest."""
    if opts.image:
        return opts
    tag = recipe_tag(recipe, opts.device)
    digest = pushed_digest(tag)
    if digest is None:
        raise InputError(
            f"kit k8s: name the image by digest, --image REPO@sha256:DIGEST: this recipe's image "
            f"{tag} was not pushed from this machine (`kit build` it, then `docker tag {tag} "
            "REPO:TAG` and `docker push REPO:TAG` where the cluster pulls from; the kit then "
            "reads its digest)"
        )
    return replace(opts, image=digest)
