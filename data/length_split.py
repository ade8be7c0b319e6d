"""What every length-split builder shares: the common columns and generating all splits in one call.

A builder's config generates all of its splits at once (a plain function of the config), so that the generator can
check that the splits never share a length before anything is written.
"""

import hashlib
import inspect
import sys

import datasets

from . import splits

COMMON_FEATURES = {
    "input": datasets.Value("string"),  # space-separated tokens
    "target": datasets.Value("string"),  # space-separated tokens: the restored sequence, or the answer
    "difficulty": datasets.Value("int32"),  # the task's split variable (digits, length, depth)
    "length": datasets.Value("int32"),  # input tokens
}


class LengthSplitConfig(datasets.BuilderConfig):
    """Base of the builders' configs: their own dataclass fields are the generating parameters."""

    def generator_arguments(self) -> dict:
        """The config's own fields, as the generator takes them."""
        own = [f for f in type(self).__dataclass_fields__ if f not in datasets.BuilderConfig.__dataclass_fields__]
        return {name: getattr(self, name) for name in own}

    def generating_parameters(self) -> dict:
        """The same, JSON-ready, with the config name: what the dataset card records."""
        arguments = self.generator_arguments()
        return {"config": self.name, **{k: list(v) if isinstance(v, tuple) else v for k, v in arguments.items()}}


def source_hash(builder_class) -> str:
    """sha256 of the source of the builder's module, of the lengthgen.data modules it takes anything from (a
    generator kept in a module of its own: nsp, ptb), of this one and of the helpers every generator shares (`splits`):
    the cache key of generated data, so that a changed generator never serves rows cached by an older one."""
    module = sys.modules[builder_class.__module__]
    used = {inspect.getmodule(value) for value in vars(module).values()}
    generators = sorted((m for m in used if m is not None and m.__name__.startswith(__package__ + ".")),
                        key=lambda m: m.__name__)
    digest = hashlib.sha256()
    for source in dict.fromkeys([module, *generators, sys.modules[__name__], splits]):
        digest.update(inspect.getsource(source).encode())
    return digest.hexdigest()[:16]


class LengthSplitBuilder(datasets.GeneratorBasedBuilder):
    """Subclasses set `EXTRA_FEATURES` and `CITATION` and implement `generate_splits()` -> {split: rows}."""

    EXTRA_FEATURES: dict = {}
    CITATION = ""

    def __init__(self, *args, **kwargs):
        from .export import BUILDERS, check_params  # (export imports the builders)

        # generating parameters checked as the command line's are (names, kinds, sizes), before datasets reads them
        builder_arguments = inspect.signature(datasets.DatasetBuilder.__init__).parameters
        params = {key: value for key, value in kwargs.items() if key not in builder_arguments}
        name = next((name for name, builder in BUILDERS.items() if builder is type(self)), None)
        if name and params:
            check_params(name, kwargs.get("config_name"), params)
        kwargs.setdefault("hash", source_hash(type(self)))  # the generator's code is part of the cache key
        super().__init__(*args, **kwargs)

    def _info(self):
        return datasets.DatasetInfo(
            description=self.__doc__,
            features=datasets.Features({**COMMON_FEATURES, **self.EXTRA_FEATURES}),
            citation=self.CITATION,
        )

    def generate_splits(self) -> dict[str, list[dict]]:
        raise NotImplementedError

    def _split_generators(self, dl_manager):
        return [
            datasets.SplitGenerator(name=name, gen_kwargs={"rows": rows})
            for name, rows in self.generate_splits().items()
        ]

    def _generate_examples(self, rows):
        yield from enumerate(rows)
