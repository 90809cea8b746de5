/* bytes.h: amounts of memory as people read them, in decimal units: "33.94 MB". Shared by the
 * compiler's plans and the runtime's start-up checks and last line, which so print alike. */
#ifndef PLAIT_BYTES_H
#define PLAIT_BYTES_H

/* Writes bytes into buf (len bytes): "512 B", "1.50 KB", up to PB, two decimals above bytes. */
void bytes_format(double bytes, char *buf, int len);

#endif
