# The one bucket mdf shares between the coordinator and every worker: job manifests,
# leases, commit records and shuffle data under jobs_prefix, datasets elsewhere.
# Encrypted with a customer-managed key, never public, versioned, and with lifecycle
# rules that abort incomplete multipart uploads and expire intermediate job data.

resource "aws_kms_key" "bucket" {
  description             = "mdf bucket ${var.bucket_name}"
  deletion_window_in_days = var.kms_key_deletion_window_days
  enable_key_rotation     = true
  policy                  = data.aws_iam_policy_document.key.json
  tags                    = var.tags
}

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

data "aws_iam_policy_document" "key" {
  # checkov:skip=CKV_AWS_111:A key policy's Resource "*" means this key only; the account root statement is the documented default that lets IAM policies grant use.
  # checkov:skip=CKV_AWS_356:As above: in a key policy "*" is the key itself, not every resource.
  # checkov:skip=CKV_AWS_109:Key administration stays with the account (root principal), as AWS's default key policy does; no other principal gets it.
  # The account administers the key; use is granted through IAM policies (iam module).
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:aws:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }
  # The workers' log group (batch module) is encrypted with this key too.
  statement {
    sid       = "CloudWatchLogsEncrypt"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${data.aws_region.current.id}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:aws:logs:${data.aws_region.current.id}:${data.aws_caller_identity.current.account_id}:log-group:*"]
    }
  }
  # Fleet instances' root volumes (fleet module) are encrypted with this key: Auto
  # Scaling launches them through its service-linked role, which must be able to use it.
  dynamic "statement" {
    for_each = var.ebs_launcher_role_arns
    content {
      sid       = "EbsLauncher${statement.key}"
      actions   = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"]
      resources = ["*"]
      principals {
        type        = "AWS"
        identifiers = [statement.value]
      }
    }
  }
  dynamic "statement" {
    for_each = var.ebs_launcher_role_arns
    content {
      sid       = "EbsLauncherGrants${statement.key}"
      actions   = ["kms:CreateGrant"]
      resources = ["*"]
      principals {
        type        = "AWS"
        identifiers = [statement.value]
      }
      condition {
        test     = "Bool"
        variable = "kms:GrantIsForAWSResource"
        values   = ["true"]
      }
    }
  }
}

resource "aws_kms_alias" "bucket" {
  name          = "alias/mdf-${var.bucket_name}"
  target_key_id = aws_kms_key.bucket.key_id
}

resource "aws_s3_bucket" "data" {
  # checkov:skip=CKV_AWS_144:Cross-region replication doubles storage of re-creatable intermediate data; replicate curated outputs with a separate rule if needed.
  # checkov:skip=CKV2_AWS_62:mdf workers poll the store for leases; no consumer needs S3 event notifications.
  # checkov:skip=CKV_AWS_18:Access logging is configured by aws_s3_bucket_logging.data when var.access_log_bucket is set; the log bucket is account-level infrastructure outside this module.
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_logging" "data" {
  count         = var.access_log_bucket == "" ? 0 : 1
  bucket        = aws_s3_bucket.data.id
  target_bucket = var.access_log_bucket
  target_prefix = "s3/${var.bucket_name}/"
}

resource "aws_s3_bucket_public_access_block" "data" {
  bucket                  = aws_s3_bucket.data.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.bucket.arn
    }
    # S3 Bucket Keys cut KMS requests (and their cost) by orders of magnitude.
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "data" {
  bucket     = aws_s3_bucket.data.id
  depends_on = [aws_s3_bucket_versioning.data]

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  rule {
    id     = "expire-intermediate-job-data"
    status = "Enabled"
    filter {
      prefix = var.jobs_prefix
    }
    expiration {
      days = var.intermediate_expiry_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
  }
}

# Requests over plain HTTP are refused.
resource "aws_s3_bucket_policy" "data" {
  bucket = aws_s3_bucket.data.id
  policy = data.aws_iam_policy_document.tls_only.json
}

data "aws_iam_policy_document" "tls_only" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.data.arn, "${aws_s3_bucket.data.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}
