#include <zmq.h>
#include <sys/eventfd.h>
