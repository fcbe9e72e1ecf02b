/* A depth check over protobuf wire bytes, run before protobuf-c unpacks
 * them: protobuf-c's unpack recurses once per nested message with no limit,
 * so a small hostile file (graph > node > attribute > graph ... thousands
 * deep) would overflow the stack. This scan is iterative, with a fixed
 * stack, and follows only the fields the descriptors say are messages. */
#include "formats/onnx/onnx_impl.h"

static bool read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

sj_status sj__onnx_check_nesting(sj_ctx *ctx, const ProtobufCMessageDescriptor *desc,
                                const void *bytes, size_t len, const char *what) {
    struct level {
        const ProtobufCMessageDescriptor *desc;
        size_t end;
    } stack[SJ_ONNX_MAX_NESTING + 1];
    const uint8_t *p = bytes;
    int top = 0;
    stack[0] = (struct level){desc, len};
    size_t pos = 0;
    /* Malformed bytes end the scan with SJ_OK: judging them is unpack's job,
     * and unpack stops at the first fault before recursing past it. */
    for (;;) {
        while (top > 0 && pos >= stack[top].end) top--;
        size_t end = stack[top].end;
        if (pos >= end) return SJ_OK;
        uint64_t tag, n;
        if (!read_varint(p, end, &pos, &tag)) return SJ_OK;
        switch (tag & 7) {
        case 0: /* varint */
            if (!read_varint(p, end, &pos, &n)) return SJ_OK;
            break;
        case 1: /* fixed64 */
            if (end - pos < 8) return SJ_OK;
            pos += 8;
            break;
        case 5: /* fixed32 */
            if (end - pos < 4) return SJ_OK;
            pos += 4;
            break;
        case 2: { /* length-delimited: a nested message, bytes, a string or a packed list */
            if (!read_varint(p, end, &pos, &n) || n > end - pos) return SJ_OK;
            uint64_t number = tag >> 3;
            const ProtobufCFieldDescriptor *f =
                number <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(stack[top].desc, (unsigned)number)
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (top == SJ_ONNX_MAX_NESTING)
                    return sj_fail(ctx, SJ_E_PARSE,
                                   "%s: nesting too deep (more than %d levels of messages inside "
                                   "each other, at byte %zu)",
                                   what, SJ_ONNX_MAX_NESTING, pos);
                stack[++top] = (struct level){f->descriptor, pos + (size_t)n};
            } else {
                pos += (size_t)n;
            }
            break;
        }
        default: /* groups (3, 4) are not in proto3; unpack refuses them */
            return SJ_OK;
        }
    }
}
