# SPDX-License-Identifier: Apache-2.0
"""mooncake: a ctypes drop-in for upstream's ``mooncake.store`` over
libmooncake.so (mooncakefs), with ``mooncake.engine`` (the transfer
engine) and ``mooncake.p2p`` (upstream's P2P Store: checkpoints shared
peer to peer). See python/README.md.

The library is found through MOONCAKE_LIB, next to this package, in a
build directory of the checkout this package lives in, or under the
install prefix (mooncake._lib.candidates()). Importing ``mooncake`` alone
loads nothing; ``import mooncake.store`` loads the library.
"""
__version__ = "0.1.0"
