# lit configuration: FileCheck tests of tile-opt, as upstream MLIR does.
import os

import lit.formats

config.name = "torch-tile"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)

repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
llvm_bin = os.environ.get("TILE_LLVM_BIN", "/usr/lib/llvm-22/bin")
tile_opt = os.path.join(repo, "build", "bin", "tile-opt")
config.substitutions.append(("tile-opt", tile_opt))
config.substitutions.append(("FileCheck", os.path.join(llvm_bin, "FileCheck")))
config.substitutions.append(("not ", os.path.join(llvm_bin, "not") + " "))
