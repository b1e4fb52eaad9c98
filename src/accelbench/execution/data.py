"""The input pipeline: synthetic samples or real local data, fed through a real DataLoader.

Real data is read as records of the kind a workload reads (workload.Images or workload.Tokens),
then `Workload.prepare` makes its samples, in the loader's worker processes as a training input
pipeline would. Formats:
- imagefolder: a directory of class directories of images (torchvision ImageFolder);
- webdataset: .tar shards of image + class files (a .tar, a directory, or shards-{000..015}.tar);
- mnist: an IDX images file (train-images-idx3-ubyte), with its labels file beside it if present;
- tokens: a .npy file of token ids, read in windows of the workload's sequence length;
- arrays: a directory of features.npy and targets.npy, row i of each a record (for Arrays);
- digits: `sklearn:digits`, the 1,797 8x8 handwritten digits that scikit-learn ships (UCI), as
  greyscale images: real data at hand on any machine, for time-to-train.

Time-to-train holds out every HELD_OUT_EVERY-th record for validation (split_loaders).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, cast

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, Subset

from accelbench.errors import AccelbenchError, missing_extra, one_line
from accelbench.records.spec import RunSpec
from accelbench.workload import Arrays, Batch, Images, Reads, Tokens, Workload

DataFormat = Literal["imagefolder", "webdataset", "mnist", "tokens", "digits", "arrays"]
DIGITS = "sklearn:digits"
HELD_OUT_EVERY = 5
"""Time-to-train validates on records 0, 5, 10, ... (20%), the same ones in every run."""

POOL_SIZE = 64
"""Distinct synthetic samples generated up front; items cycle through them so that what is timed
is the loader (indexing, collation, worker transfer, pinning), not the random number generator."""

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGE_SUFFIXES = "jpg;jpeg;png;ppm;bmp;webp"


def data_format(path: str) -> DataFormat:
    """The format of the data set at `path`, from its name and layout; raises if it has none."""
    if path == DIGITS:
        return "digits"
    if "{" in path and path.endswith(".tar"):
        return "webdataset"
    p = Path(path)
    try:
        if not p.exists():
            raise AccelbenchError(f"no data at {path}: give an existing file or directory")
    except OSError as exc:  # a name longer than the file system allows, for one
        raise AccelbenchError(f"--data: {exc.strerror}: give an existing one") from None
    if not (p.is_file() or p.is_dir()):
        raise AccelbenchError(f"{path} is neither a file nor a directory: give a data set")
    if p.is_file():
        if p.suffix == ".tar":
            return "webdataset"
        if p.suffix == ".npy":
            return "tokens"
        if "idx3-ubyte" in p.name:
            return "mnist"
    elif (p / "features.npy").is_file():
        return "arrays"
    elif any(p.glob("*.tar")):
        return "webdataset"
    elif any(child.is_dir() for child in p.iterdir()):
        return "imagefolder"
    raise AccelbenchError(
        f"cannot tell the format of {path}: expected an ImageFolder directory, .tar shards, "
        f"an MNIST *-idx3-ubyte file, a .npy token file, a directory of features.npy and "
        f"targets.npy, or {DIGITS}"
    )


KINDS: dict[type, str] = {Images: "images", Tokens: "tokens", Arrays: "arrays"}


def check_fits(path: str, reads: Reads | None, name: str) -> DataFormat:
    """The format of the data at `path`; raises unless the workload `name` can read it."""
    fmt = data_format(path)
    kind = fmt if fmt in ("tokens", "arrays") else "images"
    if reads is None:
        raise AccelbenchError(
            f"{name} trains on synthetic data only: leave out --data, or have it say what it "
            "reads (reads=Images, Tokens or Arrays; see examples/forecast.py)"
        )
    if kind != KINDS[type(reads)]:
        raise AccelbenchError(f"{name} reads {KINDS[type(reads)]}, but {path} holds {kind}")
    return fmt


def check_readable(path: str, workload: Workload, name: str) -> None:
    """Read one item of the data set as a cell would, so a malformed data set is refused
    before the first cell rather than stored as an error in every one."""
    fmt = check_fits(path, workload.reads, name)
    assert workload.reads is not None
    try:
        dataset = _real_dataset(path, fmt, workload.reads, workload.prepare, seed=0)
        if isinstance(dataset, _Records):
            if len(dataset) < 1:
                raise ValueError("it holds no items")
            dataset[0]
        else:
            next(iter(cast(IterableDataset[Batch], dataset)))
    except AccelbenchError:
        raise
    except (Exception, StopIteration) as exc:
        why = missing_extra(exc) or one_line(exc)  # a missing module: the extra to install
        raise AccelbenchError(f"cannot read --data {path}: {why}") from None


def make_loader(
    workload: Workload, spec: RunSpec, pin_memory: bool, rank: int = 0
) -> DataLoader[Batch]:
    """A loader of `spec.batch_size` items that yields at least one epoch of batches per pass
    (endless for shards); worker processes persist across epochs. Each data-parallel `rank`
    draws its own samples."""
    num_items = spec.batch_size * spec.steps_per_epoch * spec.grad_accum
    seed = spec.seed + rank * 1_000_003
    dataset: Dataset[Batch]
    sampler = None
    if spec.data is None:
        dataset = SyntheticDataset(workload, num_items, seed)
    else:
        fmt = check_fits(spec.data, workload.reads, spec.workload)
        assert workload.reads is not None
        dataset = _real_dataset(spec.data, fmt, workload.reads, workload.prepare, seed)
        if isinstance(dataset, _Records):
            # Random reads with replacement: any data set size gives full epochs, in random order.
            gen = torch.Generator().manual_seed(seed)
            sampler = RandomSampler(dataset, replacement=True, num_samples=num_items, generator=gen)
    return DataLoader(
        dataset,
        batch_size=spec.batch_size,
        sampler=sampler,
        num_workers=spec.loader_workers(),
        persistent_workers=spec.loader_workers() > 0,
        pin_memory=pin_memory,
        drop_last=True,
    )


def endless(loader: Iterable[Batch]) -> Iterator[Batch]:
    """Batches of pass after pass over a loader, each pass in its own order."""
    for _ in itertools.count():
        yield from loader


def as_numpy(batch: Batch) -> dict[str, Any]:
    """A workload's batch as numpy arrays, its one input named "x" beside its "label": what
    another framework's model of the same name takes (engines/)."""
    inputs = [name for name in batch if name != "label"]
    if len(inputs) != 1:
        raise AccelbenchError(
            f"another framework's model takes one input and a label, not {sorted(batch)}"
        )
    return {"x" if name == inputs[0] else name: t.numpy() for name, t in batch.items()}


class SyntheticDataset(Dataset[Batch]):
    """`num_items` samples cycling through a pool made by the workload."""

    def __init__(self, workload: Workload, num_items: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.pool = [workload.make_sample(gen) for _ in range(min(POOL_SIZE, num_items))]
        self.num_items = num_items

    def __len__(self) -> int:
        return self.num_items

    def __getitem__(self, index: int) -> Batch:
        return self.pool[index % len(self.pool)]


Prepare = Callable[[Batch, torch.Generator], Batch]
Reader = tuple[int, Callable[[int], Batch]]
"""A data set's number of records, and how to read record i."""


def _real_dataset(
    path: str, fmt: DataFormat, reads: Reads, prepare: Prepare, seed: int
) -> Dataset[Batch]:
    if isinstance(reads, Tokens):
        return _Records(_token_windows(path, reads), prepare, seed)
    if isinstance(reads, Arrays):
        return _Records(_arrays(path, reads), prepare, seed)
    transform = _image_transform(reads)
    if fmt == "webdataset":
        return _Shards(path, transform, prepare, seed)
    if fmt == "mnist":
        return _Records(_mnist(path, transform), prepare, seed)
    if fmt == "digits":
        return _Records(_digits(transform), prepare, seed)
    return _Records(_image_folder(path, reads, transform), prepare, seed)


class _Records(Dataset[Batch]):
    """Record `i` of a reader, prepared with a generator seeded by its index, so a sample is the
    same whichever worker makes it."""

    def __init__(self, reader: Reader, prepare: Prepare, seed: int) -> None:
        self.num_records, self.read = reader
        self.prepare, self.seed = prepare, seed

    def __len__(self) -> int:
        return self.num_records

    def __getitem__(self, index: int) -> Batch:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return self.prepare(self.read(index), gen)


def _image_transform(reads: Images) -> Callable[[Any], torch.Tensor]:
    from torchvision.transforms import v2

    mode = "RGB" if reads.channels == 3 else "L"
    if reads.recipe == "imagenet":
        steps = [
            v2.RandomResizedCrop(reads.size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN[: reads.channels], IMAGENET_STD[: reads.channels]),
        ]
    else:
        steps = [
            v2.Resize(reads.size, antialias=True),
            v2.CenterCrop(reads.size),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
        ]
    pipeline = v2.Compose(steps)
    return lambda image: pipeline(image.convert(mode))


def _image_folder(path: str, reads: Images, transform: Callable[[Any], torch.Tensor]) -> Reader:
    from torchvision.datasets import ImageFolder

    folder = ImageFolder(path)
    if len(folder.classes) > reads.num_classes:
        raise AccelbenchError(
            f"{path} has {len(folder.classes)} classes and the model {reads.num_classes}: "
            f"add --model-arg num_classes={len(folder.classes)}"
        )

    def read(index: int) -> Batch:
        image, label = folder[index]
        return {"image": transform(image), "label": torch.tensor(label)}

    return len(folder), read


def _mnist(path: str, transform: Callable[[Any], torch.Tensor]) -> Reader:
    from torchvision.datasets.mnist import read_image_file, read_label_file

    images = read_image_file(path)  # uint8 (N, H, W)
    label_path = Path(path.replace("images-idx3", "labels-idx1"))
    labels = (
        read_label_file(str(label_path))
        if label_path.is_file() and label_path != Path(path)
        else torch.zeros(len(images), dtype=torch.long)
    )
    return _grey(images, labels, transform)


def _digits(transform: Callable[[Any], torch.Tensor]) -> Reader:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise AccelbenchError(
            f"{DIGITS} needs scikit-learn: pip install 'accelbench[data]'"
        ) from None
    digits = load_digits()  # images: float 0..16, (1797, 8, 8)
    images = torch.from_numpy(digits.images * (255 / 16)).round().to(torch.uint8)
    return _grey(images, torch.from_numpy(digits.target), transform)


def _grey(
    images: torch.Tensor, labels: torch.Tensor, transform: Callable[[Any], torch.Tensor]
) -> Reader:
    """Records of uint8 greyscale images (N, H, W) and their labels."""
    from PIL import Image

    def read(index: int) -> Batch:
        image = Image.fromarray(images[index].numpy(), mode="L")
        return {"image": transform(image), "label": labels[index].long()}

    return len(images), read


def split_loaders(
    workload: Workload, spec: RunSpec, pin_memory: bool
) -> tuple[DataLoader[Batch], DataLoader[Batch]]:
    """Training and held-out loaders over `spec.data`: every HELD_OUT_EVERY-th record is held
    out; the rest are shuffled into whole epochs, a new order each pass (seeded by spec.seed)."""
    assert spec.data is not None, "the spec requires data for time-to-train"
    fmt = check_fits(spec.data, workload.reads, spec.workload)
    assert workload.reads is not None
    dataset = _real_dataset(spec.data, fmt, workload.reads, workload.prepare, spec.seed)
    if not isinstance(dataset, _Records):
        raise AccelbenchError(
            "time-to-train holds out records by index: give ImageFolder, MNIST, token, array "
            f"or {DIGITS} data, not webdataset shards"
        )
    indices = range(len(dataset))
    train = Subset(dataset, [i for i in indices if i % HELD_OUT_EVERY])
    held_out = Subset(dataset, indices[::HELD_OUT_EVERY])
    if len(train) < spec.batch_size * spec.grad_accum:
        raise AccelbenchError(
            f"{spec.data} leaves {len(train)} training records, fewer than one step's "
            f"{spec.batch_size * spec.grad_accum}: choose a smaller --batch-size"
        )
    gen = torch.Generator().manual_seed(spec.seed)
    return (
        DataLoader(
            train,
            batch_size=spec.batch_size,
            shuffle=True,
            generator=gen,
            num_workers=spec.loader_workers(),
            persistent_workers=spec.loader_workers() > 0,
            pin_memory=pin_memory,
            drop_last=True,
        ),
        DataLoader(held_out, batch_size=max(spec.batch_size, 256), pin_memory=pin_memory),
    )


def _token_windows(path: str, reads: Tokens) -> Reader:
    import numpy as np

    ids = np.load(path, mmap_mode="r")
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise AccelbenchError(
            f"{path} must hold a 1-D array of integer token ids, not {ids.dtype} {ids.shape}"
        )
    if len(ids) < reads.seq_len:
        raise AccelbenchError(
            f"{path} has {len(ids)} tokens, fewer than one sequence of {reads.seq_len}"
        )
    top, bottom = int(ids.max()), int(ids.min())
    if bottom < 0:
        raise AccelbenchError(f"{path} has token id {bottom}: token ids are 0 or more")
    if top >= reads.vocab_size:
        raise AccelbenchError(
            f"{path} has token id {top}, beyond the model's vocabulary of {reads.vocab_size}"
        )
    num_windows = len(ids) // reads.seq_len

    def read(index: int) -> Batch:
        start = index * reads.seq_len
        return {"input_ids": torch.from_numpy(ids[start : start + reads.seq_len].astype(np.int64))}

    return num_windows, read


def _arrays(path: str, reads: Arrays) -> Reader:
    import numpy as np

    arrays = {}
    for name, shape in (("features", reads.features), ("targets", reads.targets)):
        file = Path(path, f"{name}.npy")
        try:
            array = np.load(file, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise AccelbenchError(f"cannot read {file}: {one_line(exc)}") from None
        if not np.issubdtype(array.dtype, np.number) or array.shape[1:] != shape:
            raise AccelbenchError(
                f"{file} holds {array.dtype} {array.shape}; the workload reads numbers of shape "
                f"(records{''.join(f', {size}' for size in shape)})"
            )
        arrays[name] = array
    features, targets = arrays["features"], arrays["targets"]
    if len(features) != len(targets):
        raise AccelbenchError(
            f"{path} has {len(features)} rows of features and {len(targets)} of targets: one of "
            "each per record"
        )

    def read(index: int) -> Batch:
        return {
            "features": torch.from_numpy(np.asarray(features[index], dtype=np.float32)),
            "target": torch.from_numpy(np.asarray(targets[index], dtype=np.float32)),
        }

    return len(features), read


class _Shards(IterableDataset[Batch]):
    """Iterable: an endless stream of image records from webdataset shards, each worker drawing
    shards at random with replacement, as webdataset trains on large data sets."""

    def __init__(
        self, path: str, transform: Callable[[Any], torch.Tensor], prepare: Prepare, seed: int
    ) -> None:
        p = Path(path)
        self.urls: str | list[str] = sorted(str(t) for t in p.glob("*.tar")) if p.is_dir() else path
        self.transform, self.prepare, self.seed = transform, prepare, seed

    def __iter__(self) -> Iterator[Batch]:
        import webdataset as wds
        from torch.utils.data import get_worker_info

        worker = get_worker_info()
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + (worker.id if worker else 0))
        stream = (
            wds.WebDataset(self.urls, resampled=True, shardshuffle=False, nodesplitter=None)
            .decode("pil")
            .to_tuple(IMAGE_SUFFIXES, "cls")
        )
        for image, label in stream:
            record = {"image": self.transform(image), "label": torch.tensor(int(label))}
            yield self.prepare(record, gen)
