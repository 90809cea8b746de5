/* message.h: the room a one-line message of the runtime is given: enough for two paths of the longest
 * the system takes (PATH_MAX) with the cause and the fix, so that no message loses its end. */
#ifndef PLAIT_MESSAGE_H
#define PLAIT_MESSAGE_H

#include <limits.h>

enum { MESSAGE_TEXT = 2 * PATH_MAX + 512 };

#endif
