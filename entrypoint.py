#!/usr/bin/env python3
"""Entry point of the accuracy-gate Docker action: reads INPUT_* from the environment and runs the
gate (see gate/action.py). Exit code: 0 pass, 1 accuracy regressed, 2 could not evaluate."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    from gate.early_claim import claim_for_action  # noqa: E402 - the standard library only

    claim_for_action()  # an earlier run's report files, before the heavy imports (gate.early_claim)
    from gate.action import main  # noqa: E402
except KeyboardInterrupt:  # SIGINT before the gate's own handler (gate.pipeline.guarded) is in place
    print("::error title=accuracy-gate::interrupted by SIGINT; could not evaluate", flush=True)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
