/* SPDX-License-Identifier: Apache-2.0 */
/* Clocks and random bytes (see util.h). */
#include <errno.h>
#include <sys/random.h>
#include <time.h>

#include "mc_time.h"
#include "util.h"

uint64_t mcs_now_ms(void)
{
	return mc_mono_ms();
}

uint64_t mcs_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int mcs_random(void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = getrandom((char *)buf + done, len - done, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}
