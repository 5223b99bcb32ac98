// The bytes after a binary OIP request's JSON header, taken input by input.
import { ModelportError } from "../errors.js";
import type { Tensor, TensorSpec } from "../tensor.js";
import { decodeTypedTensor } from "./decode-tensor.js";
import { sizeError, tensorDataFromBytes } from "./tensor-bytes.js";

/**
 * The bytes after a binary request's JSON header. Inputs take their `binary_data_size` bytes in
 * order; `finish` refuses bytes nobody took.
 */
export class BinarySection {
  private offset = 0;

  /** `headerGiven` false: the body came without Inference-Header-Content-Length, so it holds no binary part. */
  constructor(
    private readonly bytes: Uint8Array,
    private readonly headerGiven = true,
  ) {}

  /**
   * Takes the next `size` bytes for input `name` and decodes them against `spec` with the JSON
   * path's checks; an unknown input (`spec` undefined) has its bytes skipped.
   */
  take(
    name: string,
    spec: TensorSpec | undefined,
    shape: unknown,
    datatype: unknown,
    size: unknown,
  ): Tensor | undefined {
    if (!this.headerGiven) {
      throw new ModelportError(
        "MP_ERR_BINARY_HEADER_LENGTH",
        `input '${name}' has parameters.binary_data_size but the request has no Inference-Header-Content-Length header: set it to the length in bytes of the JSON header that starts the body`,
        { input: name },
      );
    }
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
      throw sizeError(
        `input '${name}'`,
        `parameters.binary_data_size must be a non-negative integer, got ${JSON.stringify(size)}`,
      );
    }
    const left = this.bytes.length - this.offset;
    if (size > left) {
      throw sizeError(
        `input '${name}'`,
        `binary_data_size is ${size} but only ${left} bytes remain after the JSON header and the binary inputs before it`,
      );
    }
    const bytes = this.bytes.subarray(this.offset, this.offset + size);
    this.offset += size;
    if (!spec) return undefined;
    return decodeTypedTensor(spec, shape, datatype, (dt, count) =>
      tensorDataFromBytes(dt, count, bytes, `input '${name}' (binary_data_size ${size})`),
    );
  }

  /** @throws ModelportError MP_ERR_BINARY_TRAILING_BYTES when bytes are left over. */
  finish(): void {
    const left = this.bytes.length - this.offset;
    if (left > 0) {
      throw new ModelportError(
        "MP_ERR_BINARY_TRAILING_BYTES",
        `${left} bytes follow the last binary input: the binary part holds ${this.bytes.length} bytes but the inputs' binary_data_size values add up to ${this.offset}`,
        { extra: left },
      );
    }
  }
}
