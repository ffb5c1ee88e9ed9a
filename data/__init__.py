"""Benchmark data as :class:`teammed.types.Question` lists: loading, registry and sampling.

``load_dataset("medqa")`` reads a local copy (``data_dir`` or ``$TEAMMED_DATA_DIR``) or the
Hugging Face hub; ``load_dataset("path/to/file.jsonl")`` reads the unified schema;
``sample_questions`` draws a seeded (optionally stratified) subset. The ``*_questions``
functions map rows already in hand (e.g. a ``datasets.Dataset``) in each source's schema.
"""

from teammed.data.clinical_notes import clinical_note_questions
from teammed.data.ddxplus import ddxplus_questions
from teammed.data.medbullets import medbullets_questions
from teammed.data.medmcqa import medmcqa_questions
from teammed.data.medqa import medqa_questions
from teammed.data.mmlu_pro import mmlu_pro_questions
from teammed.data.pathvqa import pathvqa_questions
from teammed.data.pmc_vqa import pmc_vqa_questions
from teammed.data.pubmedqa import pubmedqa_questions
from teammed.data.registry import DATA_DIR_VARIABLE, available_datasets, load_dataset
from teammed.data.sampling import sample_questions, shard_questions
from teammed.data.unified import unified_questions

__all__ = [
    "load_dataset",
    "available_datasets",
    "sample_questions",
    "shard_questions",
    "DATA_DIR_VARIABLE",
    "unified_questions",
    "medqa_questions",
    "medmcqa_questions",
    "pubmedqa_questions",
    "mmlu_pro_questions",
    "medbullets_questions",
    "ddxplus_questions",
    "pathvqa_questions",
    "pmc_vqa_questions",
    "clinical_note_questions",
]
