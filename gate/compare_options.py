"""The settings of the compare functions beyond ``SimpleCompareFunc`` (``[compare]`` in gate.toml), as
rows that the option table (``gate.options``) turns into its entries: each is a gate.toml key, a
``check``/``run`` flag with ``polygraphy run``'s name where it has one, and an action input. Every
per-output value takes the ``[<output>:]<value>`` syntax of ``atol`` (a TOML table keyed by output,
``""`` the default). What they mean and how they are checked: ``gate.compare_funcs``."""

from __future__ import annotations

PER_OUTPUT_INT, PER_OUTPUT_FUNCS, PER_OUTPUT_COUNT = "per_output_int", "per_output_funcs", "per_output_count"
FUNC_NAMES = ("simple", "indices", "cosine", "l2", "mse", "psnr", "snr")
"""The compare functions an output can be checked with (``compare_func``)."""

THRESHOLDS = {
    "cosine": "cosine_similarity_threshold",
    "l2": "l2_threshold",
    "mse": "mse_threshold",
    "psnr": "psnr_threshold",
    "snr": "snr_threshold",
}
"""The setting that holds each single-metric compare function's threshold."""

COMPARE_FUNC_OPTIONS = (
    # (name, flag, kind, default, metavar, help)
    ("compare_func", "--compare-func", PER_OUTPUT_FUNCS, "simple", "[OUT:]FUNC[+FUNC]",
     "compare function(s) of each output: simple, indices, cosine, l2, mse, psnr, snr; several joined by +"),
    ("compare_verdict", "--compare-verdict", PER_OUTPUT_FUNCS, "all", "[OUT:]FUNC",
     "which of an output's compare functions decides its verdict (default all: every one must pass)"),
    ("max_failed_iterations", "--max-failed-iterations", PER_OUTPUT_COUNT, 0, "[OUT:]N",
     "how many iterations may fail per output: a count, or a share such as 0.5%% (default 0)"),
    ("top_k", "--top-k", PER_OUTPUT_INT, 1, "[OUT:]K", "indices: compare the top-K indices of a scores output"),
    ("top_k_axis", "--top-k-axis", PER_OUTPUT_INT, -1, "[OUT:]AXIS", "indices: the class axis (default -1)"),
    ("index_tolerance", "--index-tolerance", PER_OUTPUT_INT, 0, "[OUT:]N",
     "indices: how many positions an index may move (Polygraphy's IndicesCompareFunc)"),
    ("ties_compare_equal", "--ties-compare-equal", "bool", False, None,
     "indices: accept another index where the reference scores both within tie_atol (a tie)"),
    ("tie_atol", "--tie-atol", "per_output_float", 0.0, "[OUT:]TOL", "indices: largest score difference of a tie"),
    ("cosine_similarity_threshold", "--cosine-similarity-threshold", "per_output_float", 0.997, "[OUT:]MIN",
     "cosine: minimum cosine similarity"),
    ("l2_threshold", "--l2-threshold", "per_output_float", 1e-5, "[OUT:]MAX", "l2: maximum L2 norm of the difference"),
    ("mse_threshold", "--mse-threshold", "per_output_float", 1e-5, "[OUT:]MAX", "mse: maximum mean squared error"),
    ("psnr_threshold", "--psnr-threshold", "per_output_float", 30.0, "[OUT:]DB", "psnr: minimum PSNR in dB"),
    ("snr_threshold", "--snr-threshold", "per_output_float", 20.0, "[OUT:]DB", "snr: minimum SNR in dB"),
    # --- task metrics against labels (gate.task_metrics) ---
    ("labels", "--labels", "path", None, "DIR",
     "label store: a tensor 'label' per iteration (a class, or a sequence), in a stored-data layout"),
    ("task_metric", "--task-metric", PER_OUTPUT_FUNCS, None, "[OUT:]METRIC",
     "task metric of an output against the labels: accuracy, exact_match or ctc_exact_match"),
    ("task_top_k", "--task-top-k", PER_OUTPUT_INT, 1, "[OUT:]K", "accuracy: the label is among the top K classes"),
    ("ctc_blank", "--ctc-blank", PER_OUTPUT_INT, 0, "[OUT:]CLASS", "ctc_exact_match: the blank class"),
    ("task_min", "--task-min", "per_output_float", None, "[OUT:]MIN", "task metric floor, 0 to 1"),
    ("task_min_relative", "--task-min-relative", "per_output_float", None, "[OUT:]RATIO",
     "task metric at least RATIO times the golden outputs' (MLPerf: 0.99)"),
    ("task_max_drop", "--task-max-drop", "per_output_float", None, "[OUT:]POINTS",
     "task metric at most POINTS percentage points below the golden outputs'"),
)  # fmt: skip

NAMES = tuple(row[0] for row in COMPARE_FUNC_OPTIONS)
DEFAULTS = {row[0]: row[3] for row in COMPARE_FUNC_OPTIONS}
PER_OUTPUT = tuple(row[0] for row in COMPARE_FUNC_OPTIONS if row[2] not in ("bool", "path"))
TASK_METRICS = ("accuracy", "exact_match", "ctc_exact_match")

COMPARE_FUNC_ARGPARSE = {
    name: {} if kind == "bool" else {"metavar": metavar} if kind == "path" else
    {"nargs": "+", "action": "extend", "metavar": metavar}
    for name, _, kind, _, metavar, _ in COMPARE_FUNC_OPTIONS
}  # fmt: skip
"""``add_argument`` keywords of each flag: per-output values are ``nargs="+"`` entries, like atol's."""
