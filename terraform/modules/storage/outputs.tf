output "bucket" {
  description = "The bucket name."
  value       = aws_s3_bucket.data.id
}

output "bucket_arn" {
  description = "The bucket ARN."
  value       = aws_s3_bucket.data.arn
}

output "kms_key_arn" {
  description = "The KMS key that encrypts the bucket."
  value       = aws_kms_key.bucket.arn
}
