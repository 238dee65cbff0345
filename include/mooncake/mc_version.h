/* SPDX-License-Identifier: Apache-2.0 */
/** @file mc_version.h Version of this mooncakefs build. */
#ifndef MOONCAKE_MC_VERSION_H
#define MOONCAKE_MC_VERSION_H

#define MC_VERSION_MAJOR 0
#define MC_VERSION_MINOR 1
#define MC_VERSION_PATCH 0
#define MC_VERSION_STRING "0.1.0"

#endif
