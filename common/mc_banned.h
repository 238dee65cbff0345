/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Force-included into every translation unit (see cmake/McHelpers.cmake).
 * Functions that invite buffer overruns or hidden global state are turned
 * into compile errors, as git's banned.h does. The system headers that
 * declare them are included first so their own declarations are unaffected.
 */
#ifndef MC_BANNED_H
#define MC_BANNED_H

#include <stdio.h>
#include <string.h>
#include <time.h>

#define MC_BANNED(func) sorry_##func##_is_banned_use_the_safe_alternative

#undef strcpy
#define strcpy(x, y) MC_BANNED(strcpy)
#undef strcat
#define strcat(x, y) MC_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) MC_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) MC_BANNED(strncat)
#undef sprintf
#define sprintf(...) MC_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) MC_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) MC_BANNED(strtok)
#undef gmtime
#define gmtime(t) MC_BANNED(gmtime)
#undef localtime
#define localtime(t) MC_BANNED(localtime)
#undef ctime
#define ctime(t) MC_BANNED(ctime)
#undef asctime
#define asctime(t) MC_BANNED(asctime)

#endif
