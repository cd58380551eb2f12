"""`python -m tb_trainhealth.cli`: the same as the `tb-trainhealth` console script."""

import sys

from tb_trainhealth.cli import main

sys.exit(main())
