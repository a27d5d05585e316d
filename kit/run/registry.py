"""Every runtime, by name: the one place a new runtime is added (one line below).

The run engine never names a runtime class: it asks `choose` which one a request needs and
`prepare` to make it ready. Interactive runtimes (kit.runtime.base.Runtime) are prepared here;
batch runtimes (kit.run.batch.BatchRuntime) hand a whole plan to a scheduler and are used by
their own command (`kit slurm`).
"""

from __future__ import annotations

from dataclasses import replace

from kit.io.errors import InputError
from kit.run.batch import BatchRuntime
from kit.run.k8s.runtime import K8sRuntime
from kit.run.multinode.config import NodeConfig, node_config
from kit.run.multinode.runtime import MultiNodeRuntime
from kit.run.multinode.transport import nodes_device
from kit.run.slurm.runtime import SlurmRuntime
from kit.runtime.apptainer import OPTION as APPTAINER_OPTION
from kit.runtime.apptainer import ApptainerRuntime
from kit.runtime.base import Runtime, RuntimeRequest
from kit.runtime.host import HostRuntime
from kit.runtime.images.archive import check_archive
from kit.runtime.images.base_choice import check_reference, one_image_source
from kit.runtime.images.environments import for_device
from kit.runtime.pinned import DockerRuntime, PodmanRuntime
from kit.shared import engines
from kit.shared.engines import Engine

# name -> runtime class (its classmethod `prepare(request)` makes it ready); each class names
# its two axes: `placement` (local, multinode, slurm) and `engine` (none, docker, podman, ...)
RUNTIMES: dict[str, type] = {
    "host": HostRuntime,
    "docker": DockerRuntime,
    "podman": PodmanRuntime,
    "apptainer": ApptainerRuntime,  # `apptainer exec` of the SIF --apptainer names
    "multinode": MultiNodeRuntime,  # chosen when the recipe or --nodes names several nodes
}
BATCH_RUNTIMES: dict[str, type] = {
    "slurm": SlurmRuntime,
    "k8s": K8sRuntime,  # `kit k8s`: an Indexed Job (or JobSet) per run, watched by the driver
}
# what --runtime accepts (kit reproduce's help lists the image engines from the same tuple);
# "auto" picks apptainer when --apptainer names a SIF, else docker for GPU runs when it can, host
# otherwise
CHOICES = ("host", *engines.IMAGE_ENGINES, "apptainer", "auto")


def builds_image(name: str) -> bool:
    """Whether the named runtime builds (or loads) the kit's image, so that --env, --base-image
    and --image-archive apply to it: the one answer, its engine's (Engine.builds_image); a batch
    runtime or a name no runtime has builds none."""
    return name in RUNTIMES and Engine.builds_image(RUNTIMES[name].engine)


# the runtimes on this machine whose engine builds and exports images (`kit build`, `kit export`)
IMAGE_ENGINES = tuple(n for n, c in RUNTIMES.items() if c.placement == "local" and builds_image(n))


def axes(name: str) -> tuple[str, str]:
    """(placement, engine) of a registered runtime."""
    cls = RUNTIMES.get(name) or BATCH_RUNTIMES[name]
    return cls.placement, cls.engine


def local_runtime(engine: str) -> str | None:
    """The runtime on this machine that runs in `engine`, or None when none does."""
    return next(
        (n for n, c in RUNTIMES.items() if c.placement == "local" and c.engine == engine), None
    )


def engine_client(name: str) -> object:
    """The SDK client of a runtime's image engine (`kit build`, `kit export`)."""
    if name not in IMAGE_ENGINES:
        raise InputError(f"--runtime {name!r}: allowed: {', '.join(IMAGE_ENGINES)}")
    return RUNTIMES[name].container_class.connect()


def check_image_file(name: str, apptainer: object) -> None:
    """--apptainer names the image of the apptainer runtime only (never ignored by another)."""
    if apptainer is not None and name != "apptainer":
        raise InputError(
            f"{APPTAINER_OPTION}: only for the apptainer runtime (--runtime "
            f"apptainer); this run uses the {name} runtime"
        )


def choose(requested: str, request: RuntimeRequest) -> tuple[str, str | None]:
    """The runtime a request runs on, and a note to print when it was picked for the user."""
    if requested not in CHOICES:
        raise InputError(f"--runtime {requested!r}: allowed: {', '.join(CHOICES)}")
    if requested == "auto" and request.apptainer is not None:
        requested = "apptainer"  # the SIF names the runtime
    if request.nodes is not None:  # several machines: containers on each node's daemon
        if requested not in ("docker", "auto"):
            raise InputError("multi-node runs (nodes:, --nodes) need the docker runtime")
        check_image_file("multinode", request.apptainer)
        return "multinode", None
    name, note = requested, None
    if requested == "auto":
        # CPU runs check the method, not the hardware: host unless asked (--runtime docker)
        if request.device == "cpu":
            name, note = "host", "CPU run: host runtime (not pinned); --runtime docker pins it"
        else:
            why = DockerRuntime.unavailable(request.device)
            name = "host" if why else "docker"
            note = f"{why}: host runtime (not pinned)" if why else None
    check_image_file(name, request.apptainer)
    # no image of the kit's is built (host, apptainer): an image option cannot apply
    if not builds_image(name):
        for flag, given in (
            ("--image-archive", request.image_archive),
            ("--base-image", request.base_image),
        ):
            if given is not None:
                why = f" ({note})" if note else ""
                raise InputError(
                    f"{flag}: needs the docker runtime (--runtime docker); this run "
                    f"uses the {name} runtime{why}"
                )
    return name, note


def fit_environment(
    name: str, request: RuntimeRequest, recipe_environment: str, asked: str | None
) -> tuple[RuntimeRequest, str | None]:
    """The request with the environment a runtime that builds the kit's image (its
    `builds_image`) builds for this device, and a line saying why when it is not the recipe's;
    any other runtime gets the request unchanged."""
    if not builds_image(name):
        if asked:
            what = (
                "runs the image it is given"
                if RUNTIMES.get(name, HostRuntime).pinned
                else "runs this machine's Python"
            )
            raise InputError(
                f"--env {asked}: needs a runtime that builds an image (--runtime "
                f"docker); the {name} runtime {what}"
            )
        return request, None
    env, why = for_device(recipe_environment, request.device, asked)
    return replace(request, environment=env), why


def check_ready(name: str, request: RuntimeRequest) -> None:
    """The refusals a runtime makes without doing any work (apptainer: a SIF named, `apptainer`
    on PATH; docker, podman: the engine's daemon answers; one that builds the kit's image: one
    source of it, an --image-archive that is an image archive), for a caller that prints notices
    before it prepares the runtime."""
    if builds_image(name):  # docker, podman, multinode
        one_image_source(request.base_image, request.image_archive)
        if request.base_image is not None:
            check_reference(request.base_image)
        if request.image_archive is not None:
            check_archive(request.image_archive)
    if name == "apptainer":
        ApptainerRuntime.check(request)
    elif name in IMAGE_ENGINES:
        RUNTIMES[name].check(request)


def prepare(name: str, request: RuntimeRequest) -> Runtime:
    """The named runtime, ready to run launches (an image built or loaded, nodes reached)."""
    if name not in RUNTIMES:
        raise InputError(f"runtime {name!r}: allowed: {', '.join(RUNTIMES)}")
    return RUNTIMES[name].prepare(request)


def batch(name: str) -> type[BatchRuntime]:
    """The named batch runtime's class (constructed with its command's options)."""
    if name not in BATCH_RUNTIMES:
        raise InputError(f"batch runtime {name!r}: allowed: {', '.join(BATCH_RUNTIMES)}")
    return BATCH_RUNTIMES[name]


def nodes(recipe_nodes: object, cli_hosts: tuple[str, ...] = ()) -> NodeConfig | None:
    """The multi-node settings a run asks for (the recipe's nodes: with --nodes), or None."""
    return node_config(recipe_nodes, cli_hosts)


def device_of_nodes(requested: str, config: NodeConfig) -> str:
    """The device of a multi-node run: the nodes' daemons decide, not the driver's machine."""
    return nodes_device(requested, config)
