import sys

import torch_tile  # noqa: F401  (loads the plugin and its ops)
from torch_tile.cli import main

sys.exit(main())
